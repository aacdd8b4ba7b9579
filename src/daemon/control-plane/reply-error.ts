// What an answer from the control plane that is not 2xx/304 means to the
// daemon: 404 → not_found, 403 → denied (forbidden when the server says so),
// 401 → unauthorized, 5xx → unavailable (or membership_unavailable when the
// server already failed closed), with the server's own message when it sent
// one. Bodies that are not JSON are decided by their status alone.

import { KnowledgeError, isErrorCode, type ErrorCode } from '../../core/errors.js';

/** One answer, its body read whole (or parsed as it arrived). */
export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Empty when the body was parsed as it arrived (`parsed`). */
  readonly body: Buffer;
  readonly parsed?: { readonly value: unknown };
}

/** The KnowledgeError an answer that is not 2xx/304 means: its status first, then the body's error code and message. */
export function replyError(reply: Reply, server: string): KnowledgeError {
  let code: ErrorCode | undefined;
  let message: string | undefined;
  try {
    const parsed = JSON.parse(reply.body.toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
    if (isErrorCode(parsed.error?.code)) code = parsed.error.code;
    if (typeof parsed.error?.message === 'string') message = parsed.error.message;
  } catch {
    // not JSON: decided by status alone
  }
  const status = reply.status;
  if (status >= 500) {
    if (code === 'membership_unavailable') return new KnowledgeError(code, message ?? 'membership source unavailable');
    return new KnowledgeError('unavailable', `control plane at ${server} answered ${status}${message ? `: ${message}` : ''}`);
  }
  if (status === 404) return new KnowledgeError('not_found', message ?? 'no such file');
  if (status === 401) return new KnowledgeError('unauthorized', message ?? 'the control plane rejected the runner token');
  if (status === 403) return new KnowledgeError(code === 'forbidden' ? 'forbidden' : 'denied', message ?? 'denied');
  if (code !== undefined && code !== 'internal' && code !== 'config') return new KnowledgeError(code, message ?? code);
  return new KnowledgeError('unavailable', `control plane at ${server} answered ${status}${message ? `: ${message}` : ''}`);
}

/**
 * A prefetch request the control plane shed for load (503 with
 * `x-kfs-shed`): the replica is fine, it is serving foreground work first.
 * The prefetcher waits `retryAfterMs` and asks again; nothing else retries it
 * or moves to another replica for it.
 */
export class ShedError extends KnowledgeError {
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super('unavailable', message);
  }
}

export const isShed = (err: unknown): err is ShedError => err instanceof ShedError;

/** Retry-After in ms (seconds, as the control plane sends it), within [100 ms, 30 s]; 1 s when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined): number {
  const seconds = Number(Array.isArray(header) ? header[0] : header);
  return Number.isFinite(seconds) ? Math.min(30_000, Math.max(100, seconds * 1000)) : 1000;
}
