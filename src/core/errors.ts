// One base error with a stable `code` that the CLI's --json output, the HTTP
// layer and the FUSE errno table all match on. Add a code here and the
// compiler points at every table that must learn about it.

export const ERROR_CODES = [
  'not_found', // path or file does not exist, or a personal session may not see it
  'denied', // a team session asked for another team: explained, not hidden
  'invalid_argument', // bad flag, bad path, bad request body
  'unauthorized', // missing or wrong token
  'forbidden', // right token, wrong route (runner token on admin routes)
  'read_only', // any write through the mount
  'unavailable', // control plane down, slow or answering garbage
  'membership_unavailable', // the membership source failed: other teams fail closed
  'integrity', // bytes did not match the plan's sha256
  'too_large', // body or file over a configured limit
  'config', // bad configuration file or option at startup
  'internal', // a bug: logged, never shown as content
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class KnowledgeError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'KnowledgeError';
  }
}

export function isKnowledgeError(err: unknown): err is KnowledgeError {
  return err instanceof KnowledgeError;
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/** The code of any thrown value; anything we did not raise ourselves is `internal`. */
export function errorCodeOf(err: unknown): ErrorCode {
  return isKnowledgeError(err) ? err.code : 'internal';
}
