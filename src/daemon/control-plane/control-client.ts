// The daemon's only way to the control plane (node:http or node:https, one
// keep-alive agent; no third-party client, so mounting loads none).
//
// Rules every call follows:
// - bounded: one deadline per call (--request-timeout, plus the long-poll
//   wait for plans) covers every attempt, headers and body; past it the call
//   fails with `unavailable`, it never hangs;
// - idempotent GETs are retried up to 3 times with jittered backoff, inside
//   the same deadline, on network errors and 5xx; POSTs are not retried;
// - errors are KnowledgeErrors: network, timeout, 5xx and garbage →
//   `unavailable`; 404 → `not_found`; 403 → `denied` (server's message);
//   503 `membership_unavailable` stays that (the server already failed closed);
// - bodies are read with a byte cap so a misbehaving server cannot make the
//   daemon buffer without bound.
// The token lives in this object only; it is sent as a header, never logged.
//
// Several control-plane replicas (`--server URL1,URL2,…`): calls stick to
// one replica until it fails (network error or a 5xx `unavailable`), then
// move on to the next, at once and inside the same deadline; a dead replica
// costs the call that found it one refused connection, not an EIO. With
// more than one replica, an attempt that has other replicas left gets half
// the time left (a hung replica cannot eat the whole deadline), and the read
// tool's POST moves on too: recording a read twice changes nothing.
//
// `batch` (POST /v1/batch) is the exception to "one deadline per call": a
// batch of a few MiB may take longer than --request-timeout on a slow link
// while making progress, so --request-timeout bounds the wait for the
// headers and every gap between body chunks (inactivity), not the whole
// batch. It is not retried: its caller falls back to per-file fetches.

import * as http from 'node:http';
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { newRequestId, REQUEST_ID_HEADER } from '../../core/request-id.js';
import { KnowledgeError, isErrorCode, isKnowledgeError, type ErrorCode } from '../../core/errors.js';
import { formatKnownScopes, type KnownScope, type Plan, type PlanChanges } from '../../core/session/plan.js';
import { parseBatchStream, type BatchItem } from './batch-stream.js';
import { JsonStreamParser } from './json-stream.js';
import {
  BATCH_CONTENT_TYPE,
  SHA256_HEADER,
  type ManifestResponse,
  type ReadRequest,
  type ReadResponse,
  type ReminderResponse,
  type SessionView,
} from '../../core/wire.js';
import { checkGrant, checkManifest, checkPlan, checkPlanChanges, checkReadResponse, checkReminder, checkSession } from './wire-check.js';

export interface FileBody {
  readonly body: Buffer;
  /** The sha256 the server claims (x-kfs-sha256), if it sent one. */
  readonly sha256: string | undefined;
}

export interface PlanRequest {
  readonly threshold: number;
  /** The version the daemon has: a 304 (null) when the plan still matches it. */
  readonly etag?: string | undefined;
  /** Long-poll: let the server hold an unchanged answer up to this long. */
  readonly waitMs?: number | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** What the daemon needs from the control plane; tests wrap or fake it. */
export interface ControlClient {
  readonly serverUrl: string;
  session(): Promise<SessionView>;
  /** The current plan, or null when it still equals `etag`. */
  plan(req: PlanRequest): Promise<Plan | null>;
  /** Resolves when the session may open files of `scope` now; throws not_found/denied otherwise. */
  grant(scope: string): Promise<void>;
  /**
   * Raw file bytes; more than `maxBytes` → `integrity`. Verification is the
   * caller's job. `sha256`: the version the plan names (a control plane that
   * still holds it may answer it rather than a newer one).
   */
  file(scope: string, path: string, maxBytes: number, sha256?: string): Promise<FileBody>;
  /**
   * Files of one scope in one request, in `paths` order, each verified against
   * the sha256 its frame announces (not the plan's: that is the caller's job).
   * Throws at the first framing error, wrong byte or truncation; items already
   * yielded stay valid. Optional: clients without it are used file by file.
   */
  batch?(scope: string, paths: readonly string[], opts: BatchOptions): AsyncIterable<BatchItem>;
  read(req: ReadRequest): Promise<ReadResponse>;
  manifest(): Promise<ManifestResponse>;
  reminder(): Promise<ReminderResponse>;
  close(): Promise<void>;
}

export interface BatchOptions {
  /** A frame announcing more bytes than this fails the batch (`integrity`). */
  readonly maxFileBytes: number;
  readonly signal?: AbortSignal | undefined;
}

export interface HttpControlClientOptions {
  /** One control-plane URL, or several separated by commas (replicas of one deployment). */
  readonly serverUrl: string;
  readonly token: string;
  readonly requestTimeoutMs: number;
  /** Sockets to the control plane (prefetch and opens share them). */
  readonly connections?: number;
  /** Largest JSON body accepted (plans of 100 000 files are ~20 MB). */
  readonly maxJsonBytes?: number;
}

const MAX_RETRIES = 3;
const DEFAULT_MAX_JSON = 256 * 1024 * 1024;
/**
 * Below this, one JSON.parse of the whole body is faster than the stream
 * parser on a cold start (1 MB: ~20 ms against ~60 ms), and the memory it
 * saves is small.
 */
const STREAM_JSON_ABOVE = 4 * 1024 * 1024;
/** Idle keep-alive sockets are closed after this (sooner when the server's Keep-Alive hint says so). */
const IDLE_SOCKET_MS = 10_000;

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Empty when the body was parsed as it arrived (`parsed`). */
  readonly body: Buffer;
  readonly parsed?: { readonly value: unknown };
}

interface CallOptions {
  readonly method?: 'GET' | 'POST';
  readonly body?: string;
  readonly headers?: Record<string, string>;
  readonly extraTimeoutMs?: number;
  readonly maxBytes?: number;
  /** Called when the body exceeds maxBytes; default `too_large`. */
  readonly tooLarge?: () => KnowledgeError;
  readonly signal?: AbortSignal | undefined;
  /** A POST that may be sent again to another replica after a network error (its effect is idempotent). */
  readonly replayable?: boolean;
  /**
   * Parse a 2xx JSON body larger than STREAM_JSON_ABOVE (or of unknown
   * length) chunk by chunk as it arrives (plans: 16 MB at 100 000 files)
   * instead of holding the body and its text whole.
   */
  readonly streamJson?: boolean;
}

type Transport = Pick<typeof http, 'request' | 'Agent'>;

interface SendOptions {
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
function send(transport: Transport, url: string, opts: SendOptions): Promise<IncomingMessage> {
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

/** Encodes a scope path for a URL, segment by segment. */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const EMPTY = Buffer.alloc(0);

/** The body, at most `max` bytes; with `sink`, each chunk goes there instead and the result is empty. */
async function readCapped(body: IncomingMessage, max: number, tooLarge: () => KnowledgeError, sink?: (chunk: Buffer) => void): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > max) {
      const err = tooLarge();
      body.destroy(err);
      throw err;
    }
    if (sink !== undefined) sink(chunk);
    else chunks.push(chunk);
  }
  if (chunks.length === 0) return EMPTY;
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

/** `--server`: one URL or several separated by commas → their normalised origins+paths; invalid ones named. */
export function parseServerUrls(text: string): string[] {
  const items = text.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) {
    throw new KnowledgeError('invalid_argument', `--server "${text}": an empty URL in the list (separate several replicas with commas: http://cp-a:7420,http://cp-b:7420)`);
  }
  return items.map((item) => {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new KnowledgeError('invalid_argument', `invalid --server URL "${item}" (example: http://127.0.0.1:7700)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new KnowledgeError('invalid_argument', `--server must be an http:// or https:// URL, not "${item}"`);
    }
    return url.origin + url.pathname.replace(/\/+$/, '');
  });
}

export class HttpControlClient implements ControlClient {
  private readonly servers: string[];
  /** Index of the replica calls go to until it fails. */
  private current = 0;
  private readonly token: string;
  private readonly timeoutMs: number;
  private readonly maxJson: number;
  private readonly transport: Transport;
  private readonly agent: http.Agent;

  constructor(opts: HttpControlClientOptions) {
    this.servers = parseServerUrls(opts.serverUrl);
    this.token = opts.token;
    this.timeoutMs = opts.requestTimeoutMs;
    this.maxJson = opts.maxJsonBytes ?? DEFAULT_MAX_JSON;
    // node:https (and TLS) is loaded only for https:// servers: a local control plane does not pay for it.
    const https = this.servers.filter((s) => s.startsWith('https:')).length;
    if (https !== 0 && https !== this.servers.length) {
      throw new KnowledgeError('invalid_argument', `--server: all replicas must use the same scheme (all http:// or all https://), got ${this.servers.join(',')}`);
    }
    this.transport = https > 0 ? (createRequire(import.meta.url)('node:https') as Transport) : http;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: opts.connections ?? 32, timeout: IDLE_SOCKET_MS });
  }

  /** The replica calls go to now. */
  get serverUrl(): string {
    return this.servers[this.current] as string;
  }

  /** After a failure of replica `failed`: the next one takes over (unless another call already moved on). */
  private moveOn(failed: number): void {
    if (this.current === failed) this.current = (failed + 1) % this.servers.length;
  }

  async session(): Promise<SessionView> {
    return checkSession(this.json(await this.call('/v1/session')));
  }

  async plan(req: PlanRequest): Promise<Plan | null> {
    const body = await this.planBody(req, '');
    return body === null ? null : checkPlan(body);
  }

  /** `plan`, naming the scopes held: those still at that version come back as stubs without files (plan-changes.ts). */
  async planChanges(req: PlanRequest, known: readonly KnownScope[]): Promise<PlanChanges | null> {
    const body = await this.planBody(req, `&known=${encodeURIComponent(formatKnownScopes(known))}`);
    return body === null ? null : checkPlanChanges(body);
  }

  /** GET /v1/plan (long-poll, ETag) → the parsed body, or null for a 304. */
  private async planBody(req: PlanRequest, query: string): Promise<unknown> {
    const waitMs = req.waitMs ?? 0;
    let path = `/v1/plan?threshold=${req.threshold}${query}`;
    if (waitMs > 0) path += `&wait=${(waitMs / 1000).toFixed(3).replace(/\.?0+$/, '')}`;
    const headers: Record<string, string> = {};
    if (req.etag !== undefined && req.etag !== '') headers['if-none-match'] = `"${req.etag}"`;
    const reply = await this.call(path, { headers, extraTimeoutMs: waitMs, signal: req.signal, streamJson: true });
    return reply.status === 304 ? null : this.json(reply);
  }

  async grant(scope: string): Promise<void> {
    checkGrant(this.json(await this.call(`/v1/grants/${encodeURIComponent(scope)}`)), scope);
  }

  async file(scope: string, path: string, maxBytes: number, sha256?: string): Promise<FileBody> {
    const version = sha256 === undefined ? '' : `?sha256=${sha256}`;
    const reply = await this.call(`/v1/files/${encodeURIComponent(scope)}/${encodePath(path)}${version}`, {
      maxBytes,
      tooLarge: () => new KnowledgeError('integrity', `${scope}/${path}: the control plane sent more bytes than the plan says`),
    });
    const header = reply.headers[SHA256_HEADER];
    return { body: reply.body, sha256: typeof header === 'string' ? header : undefined };
  }

  async *batch(scope: string, paths: readonly string[], opts: BatchOptions): AsyncGenerator<BatchItem> {
    if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
    let res: IncomingMessage;
    const used = this.current;
    try {
      res = await send(this.transport, `${this.serverUrl}/v1/batch`, {
        agent: this.agent,
        method: 'POST',
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', [REQUEST_ID_HEADER]: newRequestId('kfsd') },
        body: JSON.stringify({ scope, paths }),
        signal: opts.signal,
        // Bounds the wait for the headers and every gap between body chunks.
        idleTimeoutMs: this.timeoutMs,
      });
    } catch (err) {
      if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
      const server = this.serverUrl;
      this.moveOn(used); // the per-file fetches the caller falls back to go to the next replica
      throw new KnowledgeError('unavailable', `control plane at ${server} unavailable: ${describeNetworkError(err)}`);
    }
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      let body: Buffer;
      try {
        body = await readCapped(res, 1024 * 1024, () => new KnowledgeError('unavailable', 'control plane error answer too large'));
      } catch (err) {
        if (isKnowledgeError(err)) throw err;
        throw new KnowledgeError('unavailable', `control plane at ${this.serverUrl} unavailable: ${describeNetworkError(err)}`);
      }
      throw this.errorFor({ status, headers: res.headers, body });
    }
    const type = res.headers['content-type'];
    if (type !== BATCH_CONTENT_TYPE) {
      res.destroy();
      throw new KnowledgeError('unavailable', `control plane at ${this.serverUrl} answered a batch with content-type ${String(type)}`);
    }
    let complete = false;
    try {
      for await (const item of parseBatchStream(res, paths, opts.maxFileBytes)) yield item;
      complete = true;
    } catch (err) {
      if (isKnowledgeError(err)) throw err;
      if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
      throw new KnowledgeError('unavailable', `batch from ${this.serverUrl} failed: ${describeNetworkError(err)}`);
    } finally {
      // Abandoned early (or failed): drop the connection rather than read the rest.
      if (!complete) res.destroy();
    }
  }

  async read(req: ReadRequest): Promise<ReadResponse> {
    const reply = await this.call('/v1/read', {
      method: 'POST',
      replayable: true,
      body: JSON.stringify(req),
      headers: { 'content-type': 'application/json' },
    });
    return checkReadResponse(this.json(reply));
  }

  async manifest(): Promise<ManifestResponse> {
    return checkManifest(this.json(await this.call('/v1/manifest')));
  }

  async reminder(): Promise<ReminderResponse> {
    return checkReminder(this.json(await this.call('/v1/reminder')));
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  private json(reply: Reply): unknown {
    if (reply.parsed !== undefined) return reply.parsed.value;
    try {
      return JSON.parse(reply.body.toString('utf8'));
    } catch {
      throw new KnowledgeError('unavailable', `control plane at ${this.serverUrl} answered something that is not JSON`);
    }
  }

  private notJsonIfThrows<T>(parse: () => T): T {
    try {
      return parse();
    } catch {
      throw new KnowledgeError('unavailable', `control plane at ${this.serverUrl} answered something that is not JSON`);
    }
  }

  /** One bounded call with retries; resolves only with a 2xx/304 reply. */
  private async call(path: string, opts: CallOptions = {}): Promise<Reply> {
    const method = opts.method ?? 'GET';
    const idempotent = method === 'GET';
    const several = this.servers.length > 1;
    // Another replica may get a POST that never reached an answer only when replaying it is harmless.
    const retryable = idempotent || (several && opts.replayable === true);
    const maxAttempts = Math.max(MAX_RETRIES, this.servers.length);
    const timeoutMs = this.timeoutMs + (opts.extraTimeoutMs ?? 0);
    const deadline = Date.now() + timeoutMs;
    const tried = new Set<number>();
    let lastProblem = '';
    // One id for every attempt of this call: the control plane's audit and log lines carry it.
    const requestId = newRequestId('kfsd');
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
      const used = this.current;
      tried.add(used);
      const server = this.servers[used] as string;
      // With untried replicas left, a hung one gets half the time left (a long-poll its whole wait on top).
      const budget = several && tried.size < this.servers.length ? Math.min(remaining, (opts.extraTimeoutMs ?? 0) + this.timeoutMs / 2) : remaining;
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), budget);
      const onOuterAbort = () => ac.abort();
      opts.signal?.addEventListener('abort', onOuterAbort, { once: true });
      let reply: Reply;
      try {
        const res = await send(this.transport, `${server}${path}`, {
          agent: this.agent,
          method,
          headers: { authorization: `Bearer ${this.token}`, [REQUEST_ID_HEADER]: requestId, ...opts.headers },
          body: opts.body,
          signal: ac.signal,
        });
        const status = res.statusCode ?? 0;
        const max = status >= 400 ? 1024 * 1024 : (opts.maxBytes ?? this.maxJson);
        const tooLarge = opts.tooLarge ?? (() => new KnowledgeError('unavailable', `control plane answer for ${path.split('?')[0]} is too large`));
        const length = Number(res.headers['content-length'] ?? Number.NaN);
        if (opts.streamJson === true && status >= 200 && status < 300 && !(length <= STREAM_JSON_ABOVE)) {
          const parser = new JsonStreamParser();
          const body = await readCapped(res, max, tooLarge, (chunk) => this.notJsonIfThrows(() => parser.write(chunk)));
          reply = { status, headers: res.headers, body, parsed: { value: this.notJsonIfThrows(() => parser.end()) } };
        } else {
          reply = { status, headers: res.headers, body: await readCapped(res, max, tooLarge) };
        }
      } catch (err) {
        if (isKnowledgeError(err)) throw err;
        if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
        lastProblem = `${several ? `${server}: ` : ''}${ac.signal.aborted ? `no answer within ${several ? Math.round(budget) : timeoutMs} ms` : describeNetworkError(err)}`;
        this.moveOn(used);
        if (!retryable || attempt >= maxAttempts || Date.now() >= deadline) break;
        if (!several || tried.has(this.current)) await this.backoff(attempt, deadline);
        continue;
      } finally {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onOuterAbort);
      }
      if ((reply.status >= 200 && reply.status < 300) || reply.status === 304) return reply;
      const err = this.errorFor(reply, server);
      const unavailable = reply.status >= 500 && err.code === 'unavailable';
      if (!unavailable || !retryable || (attempt >= maxAttempts && !several)) {
        throw unavailable ? new KnowledgeError('unavailable', `${err.message} (request ${requestId})`) : err;
      }
      lastProblem = err.message;
      this.moveOn(used);
      if (attempt >= maxAttempts) break;
      if (!several || tried.has(this.current)) await this.backoff(attempt, deadline);
    }
    const where = several ? `control plane (replicas ${this.servers.join(', ')})` : `control plane at ${this.serverUrl}`;
    throw new KnowledgeError('unavailable', `${where} unavailable: ${lastProblem || `no answer within ${timeoutMs} ms`} (request ${requestId})`);
  }

  private async backoff(attempt: number, deadline: number): Promise<void> {
    const base = 50 * 2 ** attempt;
    const ms = Math.min(base * (0.5 + Math.random()), Math.max(0, deadline - Date.now() - 10));
    if (ms > 0) await sleep(ms);
  }

  private errorFor(reply: Reply, server = this.serverUrl): KnowledgeError {
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
}

function describeNetworkError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const causeCode = typeof cause?.code === 'string' ? cause.code : undefined;
    return [typeof code === 'string' ? code : undefined, causeCode, err.message].filter(Boolean).join(' ');
  }
  return String(err);
}
