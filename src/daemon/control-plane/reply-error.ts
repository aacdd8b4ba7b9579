// What an answer from the control plane that is not 2xx/304 means to the
// daemon: 404 → not_found, 403 → denied (forbidden when the server says so),
// 401 → unauthorized, 5xx → unavailable (or membership_unavailable when the
// server already failed closed), with the server's own message when it sent
// one. Bodies that are not JSON are decided by their status alone. And the
// head of a batch answer, which streams and so is judged before its body.

import type { IncomingMessage } from 'node:http';
import { KnowledgeError, isErrorCode, isKnowledgeError, type ErrorCode } from '../../core/errors.js';
import { BATCH_CONTENT_TYPE, SHED_HEADER } from '../../core/wire.js';
import { describeNetworkError, readCapped } from './http-send.js';

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

/**
 * The head of a POST /v1/batch answer, before its frames are read: a shed
 * (ShedError), a refusal (its error), another content type (unavailable) all
 * throw; a 200 with the batch content type returns.
 */
export async function acceptBatchAnswer(res: IncomingMessage, server: string): Promise<void> {
  const status = res.statusCode ?? 0;
  if (status === 503 && res.headers[SHED_HEADER] !== undefined) {
    res.resume(); // a short JSON body nobody needs; the connection stays usable
    throw new ShedError(`control plane at ${server} is busy; prefetch asked to wait`, retryAfterMs(res.headers['retry-after']));
  }
  if (status !== 200) {
    let body: Buffer;
    try {
      body = await readCapped(res, 1024 * 1024, () => new KnowledgeError('unavailable', 'control plane error answer too large'));
    } catch (err) {
      if (isKnowledgeError(err)) throw err;
      throw new KnowledgeError('unavailable', `control plane at ${server} unavailable: ${describeNetworkError(err)}`);
    }
    throw replyError({ status, headers: res.headers, body }, server);
  }
  const type = res.headers['content-type'];
  if (type !== BATCH_CONTENT_TYPE) {
    res.destroy();
    throw new KnowledgeError('unavailable', `control plane at ${server} answered a batch with content-type ${String(type)}`);
  }
}
