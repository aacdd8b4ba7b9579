// One HTTP request to the control plane and the reading of its body: the
// plumbing under HttpControlClient (http-control-client.ts), which decides what
// to send, where, and what the answer means. node:http or node:https only
// (no third-party client, so mounting loads none).

import type * as http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { KnowledgeError } from '../../core/errors.js';

export type Transport = Pick<typeof http, 'request' | 'Agent'>;

export interface SendOptions {
  readonly agent: http.Agent;
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  /** Socket inactivity (no byte either way) this long destroys the request with a timeout error. */
  readonly idleTimeoutMs?: number;
}

class IdleTimeout extends Error {
  constructor(ms: number) {
    super(`no data within ${ms} ms`);
  }
}

/**
 * Sends one request; resolves with the response once its headers arrive.
 * An abort of `signal` (before or after that) destroys the request and the
 * response, so reading a body never outlives its deadline.
 */
export function send(transport: Transport, url: string, opts: SendOptions): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers = opts.body === undefined ? opts.headers : { ...opts.headers, 'content-length': String(Buffer.byteLength(opts.body)) };
    const req = transport.request(url, { agent: opts.agent, method: opts.method, headers, signal: opts.signal });
    // Errors after the response (a reset mid-body) reach the body's reader through the response.
    req.on('error', reject);
    if (opts.idleTimeoutMs !== undefined) {
      const ms = opts.idleTimeoutMs;
      req.setTimeout(ms, () => req.destroy(new IdleTimeout(ms)));
    }
    req.on('response', (res: IncomingMessage) => {
      // The reader sees errors by iterating; this listener only keeps a late one from being uncaught.
      res.on('error', () => undefined);
      const signal = opts.signal;
      if (signal !== undefined) {
        const onAbort = () => res.destroy(new Error('request aborted'));
        signal.addEventListener('abort', onAbort, { once: true });
        res.on('close', () => signal.removeEventListener('abort', onAbort));
      }
      resolve(res);
    });
    req.end(opts.body);
  });
}

const EMPTY = Buffer.alloc(0);

/**
 * The body, at most `max` bytes; with `sink`, each chunk goes there instead
 * and the result is empty. A body whose length the headers give lands in one
 * buffer chunk by chunk as it arrives: joining the chunks at the end would
 * copy it whole once more, after the last byte (at 8 MB, ~35 ms of fresh
 * memory on a VM that reports free pages to its host).
 */
export async function readCapped(body: IncomingMessage, max: number, tooLarge: () => KnowledgeError, sink?: (chunk: Buffer) => void): Promise<Buffer> {
  const declared = Number(body.headers['content-length']);
  const whole = sink === undefined && Number.isSafeInteger(declared) && declared > 0 && declared <= max ? Buffer.allocUnsafe(declared) : undefined;
  // node:http never delivers more than the declared length; were it to, that is too large as well.
  const cap = whole?.length ?? max;
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > cap) {
      const err = tooLarge();
      body.destroy(err);
      throw err;
    }
    if (sink !== undefined) sink(chunk);
    else if (whole !== undefined) chunk.copy(whole, total - chunk.length);
    else chunks.push(chunk);
  }
  // node:http ends a body of declared length at that length, or fails it.
  if (whole !== undefined) return total === whole.length ? whole : whole.subarray(0, total);
  if (chunks.length === 0) return EMPTY;
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

/** A network error's codes and message, for the error a failed call reports. */
export function describeNetworkError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const causeCode = typeof cause?.code === 'string' ? cause.code : undefined;
    return [typeof code === 'string' ? code : undefined, causeCode, err.message].filter(Boolean).join(' ');
  }
  return String(err);
}
