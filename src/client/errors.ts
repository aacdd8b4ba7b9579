// Error classes of the client library, one per failure a caller branches on,
// each with the stable `code` the daemon, the CLI's --json output and the
// exit codes use (undici's pattern: one base class, a subclass per failure,
// match on `code` or `instanceof`). They all extend KnowledgeError, so code
// that already catches KnowledgeError keeps working.
//
// `temporary` says whether trying again later can help: the daemon, the
// control plane or the membership source was down, or bytes arrived damaged.

import { KnowledgeError, type ErrorCode } from '../core/errors.js';

export { KnowledgeError, ERROR_CODES, isKnowledgeError, type ErrorCode } from '../core/errors.js';

const TEMPORARY_CODES: ReadonlySet<ErrorCode> = new Set(['unavailable', 'membership_unavailable', 'integrity']);

/** True when the same call may succeed later without anything else changing. */
export function isTemporary(err: unknown): boolean {
  return err instanceof KnowledgeError && TEMPORARY_CODES.has(err.code);
}

/**
 * No such file. Also what a personal session gets for a team its creator is
 * not a member of: the message is byte-identical to a missing file's.
 */
export class NotFoundError extends KnowledgeError {
  constructor(message: string) {
    super('not_found', message);
    this.name = 'NotFoundError';
  }
}

/** A team session asked for another team; the message says why and what to do. */
export class DeniedError extends KnowledgeError {
  constructor(message: string) {
    super('denied', message);
    this.name = 'DeniedError';
  }
}

/** The request was wrong (a path outside knowledge/, an offset below 0, …); retrying will not help. */
export class InvalidArgumentError extends KnowledgeError {
  constructor(message: string) {
    super('invalid_argument', message);
    this.name = 'InvalidArgumentError';
  }
}

/** The control plane (`unavailable`) or the membership source (`membership_unavailable`) did not answer; temporary. */
export class UnavailableError extends KnowledgeError {
  constructor(message: string, code: 'unavailable' | 'membership_unavailable' = 'unavailable', options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'UnavailableError';
  }
}

/**
 * Why the daemon could not be used: nobody at the socket, no permission on
 * it, a socket another user could have put there (refused before sending
 * anything), no answer in time, or an answer that makes no sense.
 */
export type UnreachableReason = 'no_daemon' | 'permission' | 'untrusted' | 'no_answer' | 'bad_answer';

/**
 * The mount daemon could not be used over its control socket (`reason` says
 * why). `code` is `unavailable`, so callers that only match codes need not
 * know the difference from a control plane outage.
 */
export class DaemonUnreachableError extends UnavailableError {
  readonly socketPath: string;
  readonly reason: UnreachableReason;
  constructor(socketPath: string, reason: UnreachableReason, message: string, options?: { cause?: unknown }) {
    super(message, 'unavailable', options);
    this.name = 'DaemonUnreachableError';
    this.socketPath = socketPath;
    this.reason = reason;
  }
}

/** The bytes received did not match their sha256; nothing was returned; temporary. */
export class IntegrityError extends KnowledgeError {
  constructor(message: string) {
    super('integrity', message);
    this.name = 'IntegrityError';
  }
}

/** The error the daemon reported as `{code, message}`, as the class callers match on. */
export function errorFromWire(code: ErrorCode, message: string): KnowledgeError {
  switch (code) {
    case 'not_found':
      return new NotFoundError(message);
    case 'denied':
      return new DeniedError(message);
    case 'invalid_argument':
      return new InvalidArgumentError(message);
    case 'unavailable':
    case 'membership_unavailable':
      return new UnavailableError(message, code);
    case 'integrity':
      return new IntegrityError(message);
    default:
      return new KnowledgeError(code, message);
  }
}
