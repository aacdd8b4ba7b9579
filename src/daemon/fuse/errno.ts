// One table from error code to errno: the only place the mount decides what a
// failure looks like to `cat`/`ls`. `satisfies Record<ErrorCode, number>`
// makes a new error code without an errno a compile error. Anything that is
// not a KnowledgeError is a bug: it becomes EIO and is logged once per
// message (bounded), never per operation.

import { constants } from 'node:os';
import { isKnowledgeError, type ErrorCode } from '../../core/errors.js';

const E = constants.errno;

/** Positive errno per code; the FUSE adapter negates it. */
export const ERRNO_FOR_CODE = {
  not_found: E.ENOENT,
  // The filesystem turns a denied open into not_found itself; this is the fallback.
  denied: E.ENOENT,
  invalid_argument: E.EINVAL,
  unauthorized: E.EACCES,
  forbidden: E.EACCES,
  read_only: E.EROFS,
  unavailable: E.EIO,
  membership_unavailable: E.EIO,
  integrity: E.EIO,
  too_large: E.EFBIG,
  config: E.EIO,
  internal: E.EIO,
} as const satisfies Record<ErrorCode, number>;

export const EISDIR = E.EISDIR;
export const ENOTDIR = E.ENOTDIR;
export const EBADF = E.EBADF;
export const EROFS = E.EROFS;
export const ENOENT = E.ENOENT;
export const EIO = E.EIO;
export const ESTALE = E.ESTALE;
export const EACCES = E.EACCES;

/** Raised inside the filesystem core for conditions with no error code (EISDIR, EBADF, …). */
export class ErrnoError extends Error {
  constructor(readonly errno: number, message: string) {
    super(message);
    this.name = 'ErrnoError';
  }
}

const MAX_LOGGED = 100;

export class ErrnoMapper {
  private readonly logged = new Set<string>();
  constructor(private readonly log: (line: string) => void) {}

  /** Positive errno for any thrown value. */
  toErrno(err: unknown): number {
    if (isKnowledgeError(err)) return ERRNO_FOR_CODE[err.code];
    if (err instanceof ErrnoError) return err.errno;
    const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    if (this.logged.size < MAX_LOGGED && !this.logged.has(text)) {
      this.logged.add(text);
      this.log(`unexpected error (answered EIO): ${text}`);
    }
    return E.EIO;
  }
}
