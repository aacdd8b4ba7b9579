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
// one replica until it fails, then move on to the next, at once and inside
// the same deadline; a dead replica costs the call that found it one
// refused connection, not an EIO. Failing is: a network error, a 5xx
// `unavailable`, an answer that cannot be used (not JSON, not a valid
// plan/session/…, file bytes matching neither the sha256 asked for nor the
// server's own header), or a 401 while untried replicas are left. A 404 or
// 403 is a definite answer and never moves on: another replica would say
// the same, and the caller needs its meaning (ENOENT, the guidance). With
// more than one replica, an attempt that has other replicas left gets half
// the time left (a hung replica cannot eat the whole deadline), and the read
// tool's POST moves on too: recording a read twice changes nothing.
//
// `batch` (POST /v1/batch) is the exception to "one deadline per call": a
// batch of a few MiB may take longer than --request-timeout on a slow link
// while making progress, so --request-timeout bounds the wait for the
// headers and every gap between body chunks (inactivity), not the whole
// batch. It is not retried: its caller falls back to per-file fetches.

import type * as Http from 'node:http';
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { newRequestId, REQUEST_ID_HEADER } from '../../core/request-id.js';
import { KnowledgeError, isKnowledgeError } from '../../core/errors.js';
import { sha256Hex } from '../../core/sha256.js';
import { formatKnownScopes, type KnownScope, type Plan, type PlanChanges } from '../../core/session/plan.js';
import { PLAN_FORM_COLUMNS } from '../../core/session/plan-columns.js';
import { PACKED_PLAN_TYPE } from '../../core/session/plan-packed.js';
import { parseBatchStream, type BatchItem } from './batch-stream.js';
import type { BatchOptions, ControlClient, FileBody, PlanRequest } from './control-client.js';
import { JsonStreamParser } from './json-stream.js';
import { isPackedPlanType, unpackPlan } from './packed-plan.js';
import {
  PREFETCH_PRIORITY,
  PRIORITY_HEADER,
  SHA256_HEADER,
  type CanLoadRequest,
  type CanLoadResponse,
  type ManifestResponse,
  type ReadRequest,
  type ReadResponse,
  type ReminderResponse,
  type SessionView,
} from '../../core/wire.js';
import { describeNetworkError, readCapped, send, type Transport } from './http-send.js';
import { parseServerUrls, Replicas } from './replicas.js';
import { acceptBatchAnswer, replyError, type Reply } from './reply-error.js';
import { checkCanLoadResponse, checkGrant, checkManifest, checkPlan, checkPlanChanges, checkReadResponse, checkReminder, checkSession } from './wire-check.js';

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

/** Encodes a scope path for a URL, segment by segment. */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** What a plan request accepts: the packed form first, JSON (rows or columns) from a control plane that predates it. */
const PLAN_ACCEPT = `${PACKED_PLAN_TYPE}, application/json;q=0.5`;

const contentType = (headers: IncomingMessage['headers']): string | undefined => headers['content-type'];

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class HttpControlClient implements ControlClient {
  private readonly replicas: Replicas;
  private readonly token: string;
  private readonly timeoutMs: number;
  private readonly maxJson: number;
  private readonly transport: Transport;
  private readonly agent: Http.Agent;

  constructor(opts: HttpControlClientOptions) {
    this.replicas = new Replicas(parseServerUrls(opts.serverUrl));
    this.token = opts.token;
    this.timeoutMs = opts.requestTimeoutMs;
    this.maxJson = opts.maxJsonBytes ?? DEFAULT_MAX_JSON;
    // node:https (and TLS) is loaded only for https:// servers: a local control plane does not pay for it.
    const servers = this.replicas.urls;
    const https = servers.filter((s) => s.startsWith('https:')).length;
    if (https !== 0 && https !== servers.length) {
      throw new KnowledgeError('invalid_argument', `--server: all replicas must use the same scheme (all http:// or all https://), got ${servers.join(',')}`);
    }
    // node:http through require too: on Node 22 and later an ES import of it also loads Node's bundled undici
    // (~40 ms of a start; docs/PERFORMANCE.md, "node:http through require").
    const load = createRequire(import.meta.url);
    this.transport = (https > 0 ? load('node:https') : load('node:http')) as Transport;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: opts.connections ?? 32, timeout: IDLE_SOCKET_MS });
  }

  /** The replica calls go to now. */
  get serverUrl(): string {
    return this.replicas.url;
  }

  async session(): Promise<SessionView> {
    return this.call('/v1/session', {}, (reply) => checkSession(this.json(reply)));
  }

  async plan(req: PlanRequest): Promise<Plan | null> {
    return this.planBody(req, '', checkPlan);
  }

  /** `plan`, naming the scopes held: those still at that version come back as stubs without files (plan-changes.ts). */
  async planChanges(req: PlanRequest, known: readonly KnownScope[]): Promise<PlanChanges | null> {
    return this.planBody(req, `&known=${encodeURIComponent(formatKnownScopes(known))}`, checkPlanChanges);
  }

  /** GET /v1/plan (long-poll, ETag) → the body `check` accepts, or null for a 304. */
  private async planBody<T>(req: PlanRequest, query: string, check: (body: unknown) => T): Promise<T | null> {
    const waitMs = req.waitMs ?? 0;
    // Packed (plan-packed.ts) by Accept; a control plane that predates it answers the `form` asked for, columns,
    // and one that predates columns answers rows. All three are taken.
    let path = `/v1/plan?threshold=${req.threshold}&form=${PLAN_FORM_COLUMNS}${query}`;
    if (waitMs > 0) path += `&wait=${(waitMs / 1000).toFixed(3).replace(/\.?0+$/, '')}`;
    const headers: Record<string, string> = { accept: PLAN_ACCEPT };
    if (req.etag !== undefined && req.etag !== '') headers['if-none-match'] = `"${req.etag}"`;
    return this.call(path, { headers, extraTimeoutMs: waitMs, signal: req.signal, streamJson: true }, (reply) => {
      if (reply.status === 304) return null;
      return check(isPackedPlanType(contentType(reply.headers)) ? unpackPlan(reply.body) : this.json(reply));
    });
  }

  async grant(scope: string): Promise<void> {
    await this.call(`/v1/grants/${encodeURIComponent(scope)}`, {}, (reply) => checkGrant(this.json(reply), scope));
  }

  async file(scope: string, path: string, maxBytes: number, sha256?: string): Promise<FileBody> {
    const version = sha256 === undefined ? '' : `?sha256=${sha256}`;
    const opts: CallOptions = {
      maxBytes,
      tooLarge: () => new KnowledgeError('integrity', `${scope}/${path}: the control plane sent more bytes than the plan says`),
    };
    return this.call(`/v1/files/${encodeURIComponent(scope)}/${encodePath(path)}${version}`, opts, (reply, last) => {
      const header = reply.headers[SHA256_HEADER];
      const claimed = typeof header === 'string' ? header : undefined;
      // With another replica left, bytes that are neither the version asked for nor the one the
      // server names (a flipped byte, a page that is not the file) are worth asking it for. The
      // last answer goes to the caller, which verifies every body against the plan anyway.
      if (!last && sha256 !== undefined) {
        const actual = sha256Hex(reply.body);
        if (actual !== sha256 && actual !== claimed) {
          throw new KnowledgeError('integrity', `${scope}/${path}: bytes from the control plane match neither the plan's sha256 nor its own`);
        }
        return { body: reply.body, sha256: claimed, actual };
      }
      return { body: reply.body, sha256: claimed };
    });
  }

  async *batch(scope: string, paths: readonly string[], opts: BatchOptions): AsyncGenerator<BatchItem> {
    if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
    let res: IncomingMessage;
    const used = this.replicas.currentIndex;
    try {
      res = await send(this.transport, `${this.serverUrl}/v1/batch`, {
        agent: this.agent,
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.token}`,
          'content-type': 'application/json',
          [REQUEST_ID_HEADER]: newRequestId('kfsd'),
          ...(opts.prefetch === true ? { [PRIORITY_HEADER]: PREFETCH_PRIORITY } : {}),
        },
        body: JSON.stringify({ scope, paths }),
        signal: opts.signal,
        // Bounds the wait for the headers and every gap between body chunks.
        idleTimeoutMs: this.timeoutMs,
      });
    } catch (err) {
      if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
      const server = this.serverUrl;
      this.replicas.moveOn(used); // the per-file fetches the caller falls back to go to the next replica
      throw new KnowledgeError('unavailable', `control plane at ${server} unavailable: ${describeNetworkError(err)}`);
    }
    await acceptBatchAnswer(res, this.serverUrl);
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
    const opts: CallOptions = { method: 'POST', replayable: true, body: JSON.stringify(req), headers: { 'content-type': 'application/json' } };
    return this.call('/v1/read', opts, (reply) => checkReadResponse(this.json(reply)));
  }

  /** CanLoadScope for a harness's resources: one answer per scope, refusals included (they are answers, not errors). */
  async canLoad(req: CanLoadRequest): Promise<CanLoadResponse> {
    const opts: CallOptions = { method: 'POST', replayable: true, body: JSON.stringify(req), headers: { 'content-type': 'application/json' } };
    return this.call('/v1/can-load', opts, (reply) => checkCanLoadResponse(this.json(reply), req));
  }

  async manifest(): Promise<ManifestResponse> {
    return this.call('/v1/manifest', {}, (reply) => checkManifest(this.json(reply)));
  }

  async reminder(): Promise<ReminderResponse> {
    return this.call('/v1/reminder', {}, (reply) => checkReminder(this.json(reply)));
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

  /**
   * One bounded call with retries; resolves with what `accept` makes of a
   * 2xx/304 reply (`last`: no other replica is left to ask). An answer that
   * cannot be used (not JSON, fails its check, too large, or a 401 while
   * other replicas are left) moves on to a replica not tried yet in this
   * call; a definite refusal (404, 403, other 4xx) is the answer.
   */
  private async call<T>(path: string, opts: CallOptions, accept: (reply: Reply, last: boolean) => T): Promise<T> {
    const method = opts.method ?? 'GET';
    const idempotent = method === 'GET';
    const servers = this.replicas.urls;
    const several = this.replicas.several;
    // Another replica may get a POST that never reached an answer only when replaying it is harmless.
    const retryable = idempotent || (several && opts.replayable === true);
    const maxAttempts = Math.max(MAX_RETRIES, servers.length);
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
      const used = this.replicas.currentIndex;
      tried.add(used);
      const server = servers[used] as string;
      // An unusable answer from this replica is worth asking another one, not yet tried in this call.
      const untriedLeft = retryable && tried.size < servers.length;
      // With untried replicas left, a hung one gets half the time left (a long-poll its whole wait on top).
      const budget = several && tried.size < servers.length ? Math.min(remaining, (opts.extraTimeoutMs ?? 0) + this.timeoutMs / 2) : remaining;
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
        const json = !isPackedPlanType(contentType(res.headers));
        if (opts.streamJson === true && json && status >= 200 && status < 300 && !(length <= STREAM_JSON_ABOVE)) {
          const parser = new JsonStreamParser();
          const body = await readCapped(res, max, tooLarge, (chunk) => this.notJsonIfThrows(() => parser.write(chunk)));
          reply = { status, headers: res.headers, body, parsed: { value: this.notJsonIfThrows(() => parser.end()) } };
        } else {
          reply = { status, headers: res.headers, body: await readCapped(res, max, tooLarge) };
        }
      } catch (err) {
        if (isKnowledgeError(err)) {
          // Not JSON or too large, found while reading the body.
          if (!untriedLeft) throw err;
          lastProblem = `${server}: ${err.message}`;
          this.replicas.moveOn(used);
          continue;
        }
        if (opts.signal?.aborted) throw new KnowledgeError('unavailable', 'request cancelled');
        lastProblem = `${several ? `${server}: ` : ''}${ac.signal.aborted ? `no answer within ${several ? Math.round(budget) : timeoutMs} ms` : describeNetworkError(err)}`;
        this.replicas.moveOn(used);
        if (!retryable || attempt >= maxAttempts || Date.now() >= deadline) break;
        if (!several || tried.has(this.replicas.currentIndex)) await this.backoff(attempt, deadline);
        continue;
      } finally {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onOuterAbort);
      }
      if ((reply.status >= 200 && reply.status < 300) || reply.status === 304) {
        try {
          return accept(reply, !untriedLeft);
        } catch (err) {
          if (!untriedLeft || !isKnowledgeError(err)) throw err;
          lastProblem = `${server}: ${err.message}`;
          this.replicas.moveOn(used);
          continue;
        }
      }
      const err = replyError(reply, server);
      // A replica refusing the token while others are left (its token list behind, or not this
      // deployment's): ask the next; from the last one, 401 is the answer.
      if (err.code === 'unauthorized' && untriedLeft) {
        lastProblem = err.message;
        this.replicas.moveOn(used);
        continue;
      }
      const unavailable = reply.status >= 500 && err.code === 'unavailable';
      if (!unavailable || !retryable || (attempt >= maxAttempts && !several)) {
        throw unavailable ? new KnowledgeError('unavailable', `${err.message} (request ${requestId})`) : err;
      }
      lastProblem = err.message;
      this.replicas.moveOn(used);
      if (attempt >= maxAttempts) break;
      if (!several || tried.has(this.replicas.currentIndex)) await this.backoff(attempt, deadline);
    }
    const where = several ? `control plane (replicas ${servers.join(', ')})` : `control plane at ${this.serverUrl}`;
    throw new KnowledgeError('unavailable', `${where} unavailable: ${lastProblem || `no answer within ${timeoutMs} ms`} (request ${requestId})`);
  }

  private async backoff(attempt: number, deadline: number): Promise<void> {
    const base = 50 * 2 ** attempt;
    const ms = Math.min(base * (0.5 + Math.random()), Math.max(0, deadline - Date.now() - 10));
    if (ms > 0) await sleep(ms);
  }

}

