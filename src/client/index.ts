// The `knowledgefs` package entry: `import { KnowledgeClient } from 'knowledgefs'`.
// Only the client library is public; the CLI, daemon and control plane are not.

export { KnowledgeClient, READ_OUTPUT_CAP, RESOURCE_KINDS } from './knowledge-client.js';
export type { KnowledgeClientOptions, ReadOptions, ReadResult, CanLoadOptions, CanLoadResult, CanLoadAnswer, ResourceKind, Manifest, Reminder, DaemonStatus } from './knowledge-client.js';
export {
  KnowledgeError,
  NotFoundError,
  DeniedError,
  InvalidArgumentError,
  UnavailableError,
  DaemonUnreachableError,
  IntegrityError,
  ERROR_CODES,
  isKnowledgeError,
  isTemporary,
} from './errors.js';
export type { ErrorCode, UnreachableReason } from './errors.js';
export { DEFAULT_TIMEOUT_MS } from './socket-transport.js';
