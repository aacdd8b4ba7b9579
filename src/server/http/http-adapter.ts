// The thin node:http layer: raw request → ApiRequest, ApiResponse → bytes.
// Keeps the path percent-encoded (never `new URL`, which would resolve `..`),
// caps bodies at maxBodyBytes (413), never sends a Date header (so two
// answers that must be identical are byte-identical), and aborts in-flight
// long-polls when the client leaves or the server closes. Every answered
// request is counted and timed by route template (the router's httpRouteOf), from
// arrival to the last byte handed to the socket. Every answer carries the
// request's `x-request-id` (core/request-id.ts).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { Log } from '../../core/text/log-line.js';
import { acceptRequestId, newRequestId, REQUEST_ID_HEADER } from '../../core/request-id.js';
import { CONTROL_PLANE_METRICS as M, NO_METRICS, statusClass, type MetricsRecorder } from '../../core/metrics.js';
import { PREFETCH_PRIORITY, PRIORITY_HEADER } from '../../core/wire.js';
import { bodyParts, errorResponse, type ApiRequest, type ApiResponse } from './api.js';
import { httpRouteOf, type Handler } from './router.js';

export interface HttpAdapterOptions {
  readonly maxBodyBytes: number;
  readonly log: Log;
  readonly metrics?: MetricsRecorder;
}

function splitUrl(url: string): { rawPath: string; query: URLSearchParams } {
  const q = url.indexOf('?');
  // Stryker disable next-line EqualityOperator: a request target starts with "/", so "?" is never at 0
  return { rawPath: q < 0 ? url : url.slice(0, q), query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)) };
}

/** Counts the request in flight now, and by route and status once its answer is sent. */
function meter(method: string, rawPath: string, query: URLSearchParams, res: ServerResponse, metrics: MetricsRecorder): void {
  const started = performance.now();
  const route = httpRouteOf(method, rawPath, query);
  metrics.add(M.httpInFlight, {}, 1);
  res.on('close', () => {
    metrics.add(M.httpInFlight, {}, -1);
    // A client that left before its answer was sent has no status to count.
    if (!res.writableFinished) return;
    metrics.inc(M.httpRequests, { route, status_class: statusClass(res.statusCode) });
    metrics.observe(M.httpDuration, { route }, (performance.now() - started) / 1000);
  });
}

function write(res: ServerResponse, response: ApiResponse, headOnly = false, closing = false): void {
  if (res.headersSent || res.destroyed) return;
  res.sendDate = false;
  // Shutting down: answer, then close the connection instead of keeping it alive.
  if (closing) res.shouldKeepAlive = false;
  const parts = bodyParts(response.body);
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  const bodiless = response.status === 304 || response.status === 204;
  if (!bodiless) res.setHeader('content-length', parts.reduce((n, part) => n + part.length, 0));
  // Stryker disable next-line ConditionalExpression,LogicalOperator,BlockStatement: node:http itself sends no body for HEAD, 204 or 304
  if (headOnly || bodiless) {
    res.end();
    return;
  }
  // Corked: the pieces leave in as few packets as one buffer would, without being copied into one.
  // Stryker disable next-line CallExpression: fewer packets, the same bytes
  res.cork();
  for (const part of parts.slice(0, -1)) res.write(part);
  res.end(parts[parts.length - 1]);
  // Stryker disable next-line CallExpression: end() sends what was corked anyway
  res.uncork();
}

/** A streamed answer: waits for `drain` between chunks; stops when the client leaves; cuts the socket on error. */
async function writeStream(res: ServerResponse, response: ApiResponse, stream: AsyncIterable<Buffer>, log: (line: string) => void, closing: boolean): Promise<void> {
  if (res.headersSent || res.destroyed) return;
  res.sendDate = false;
  if (closing) res.shouldKeepAlive = false;
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  try {
    for await (const chunk of stream) {
      if (res.destroyed) break;
      if (!res.write(chunk)) await drainedOrClosed(res);
    }
    // Stryker disable next-line ConditionalExpression: end() on a destroyed response does nothing
    if (!res.destroyed) res.end();
  } catch (err) {
    log(`streamed answer failed, connection cut: ${err instanceof Error ? err.message : String(err)}`);
    res.destroy();
  }
}

/** Resolves once `stream` drains or closes, whichever comes first, leaving no listener behind. */
export function drainedOrClosed(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
  });
}

function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    // Stryker disable next-line LogicalOperator,StringLiteral: Number(undefined) is NaN, which is no more over the cap than 0
    const declared = Number(req.headers['content-length'] ?? '0');
    if (declared > max) {
      req.resume();
      resolve('too-large');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      // Stryker disable next-line ConditionalExpression: past the cap the answer is already 413; the chunks kept then are memory only
      if (done) return;
      size += chunk.length;
      if (size > max) {
        // Stryker disable next-line BooleanLiteral: a promise resolves once: the later resolve calls change nothing
        done = true;
        resolve('too-large');
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      // Stryker disable next-line ConditionalExpression: a promise resolves once: resolving again after 'too-large' changes nothing
      if (!done) resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

export function createHttpServer(handler: Handler, options: HttpAdapterOptions, shutdown: AbortSignal): Server {
  const metrics = options.metrics ?? NO_METRICS;
  return createServer(async (req, res) => {
    // Stryker disable next-line BooleanLiteral: write() and writeStream() turn the Date header off again before anything is sent
    res.sendDate = false;
    // Stryker disable next-line StringLiteral,LogicalOperator: node:http always sets url and method on a server's request
    const method = req.method ?? 'GET';
    // Stryker disable next-line StringLiteral: node:http always sets url and method on a server's request
    const { rawPath, query } = splitUrl(req.url ?? '/');
    meter(method, rawPath, query, res, metrics);
    const requestId = acceptRequestId(req.headers[REQUEST_ID_HEADER]) ?? newRequestId('kfs');
    res.setHeader(REQUEST_ID_HEADER, requestId);
    const controller = new AbortController();
    const onShutdown = () => controller.abort();
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed when the response closes, before or after an abort
    shutdown.addEventListener('abort', onShutdown, { once: true });
    res.on('close', () => {
      // Only a client that left early needs its long-poll ended.
      if (!res.writableFinished) controller.abort();
      shutdown.removeEventListener('abort', onShutdown);
    });
    try {
      const body = await readBody(req, options.maxBodyBytes);
      if (body === 'too-large') {
        res.setHeader('connection', 'close');
        write(res, errorResponse('too_large', `request body larger than ${options.maxBodyBytes} bytes`));
        return;
      }
      const apiRequest: ApiRequest = {
        method,
        rawPath,
        query,
        authorization: req.headers.authorization,
        ifNoneMatch: req.headers['if-none-match'],
        accept: req.headers.accept,
        body,
        signal: controller.signal,
        requestId,
        prefetch: req.headers[PRIORITY_HEADER] === PREFETCH_PRIORITY,
      };
      const isHead = apiRequest.method === 'HEAD';
      const response = await handler(isHead ? { ...apiRequest, method: 'GET' } : apiRequest);
      if (response.stream !== undefined && !isHead) await writeStream(res, response, response.stream, options.log, shutdown.aborted);
      else write(res, response, isHead, shutdown.aborted);
    } catch (err) {
      options.log(`request ${requestId} failed: ${err instanceof Error ? err.message : String(err)}`, { level: 'error', requestId });
      write(res, errorResponse('internal', 'internal error (logged by the control plane)'));
    }
  });
}
