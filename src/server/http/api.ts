// Plain-data request and response types for the route handlers, so handlers
// know nothing about node:http (http-adapter.ts translates), plus the few
// response builders every route shares.
//
// Every error answer is built here, from the request alone: a personal
// session's denial and a missing file go through the same `notFound` call and
// therefore carry the same status, headers and body.

import { KnowledgeError, type ErrorCode } from '../../core/errors.js';
import { packPathProblem, segmentProblem } from '../../core/paths.js';
import { parseScope, type ScopeName } from '../../core/scope.js';
import { HTTP_STATUS, type ErrorBody } from '../../core/wire.js';

export interface ApiRequest {
  readonly method: string;
  /** The path as sent, still percent-encoded, without the query string. */
  readonly rawPath: string;
  readonly query: URLSearchParams;
  readonly authorization: string | undefined;
  readonly ifNoneMatch: string | undefined;
  /** The `Accept` header (GET /v1/plan answers the packed form when it names it). */
  readonly accept?: string | undefined;
  readonly body: Buffer;
  /** Aborted when the client goes away or the server shuts down. */
  readonly signal: AbortSignal;
  /** The client's `x-request-id`, or one made up for it (echoed in the answer, written to audit and log lines). */
  readonly requestId: string;
  /** True for background work nobody waits for (`x-kfs-priority: prefetch`): served only while a prefetch slot is free. */
  readonly prefetch?: boolean;
}

export interface ApiResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Pieces (an array) are sent one after another, as one body: large answers are not copied into one buffer. */
  readonly body: Buffer | string | readonly Buffer[];
  /**
   * A streamed body instead of `body` (sent chunked, with backpressure). An
   * error while streaming cuts the connection, so the client sees truncation.
   */
  readonly stream?: AsyncIterable<Buffer>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}): ApiResponse {
  return { status, headers: { 'content-type': JSON_TYPE, ...headers }, body: JSON.stringify(value) };
}

/** A body as the buffers that are sent, at least one. */
export function bodyParts(body: ApiResponse['body']): readonly Buffer[] {
  // Stryker disable next-line StringLiteral: an empty encoding name is UTF-8 too
  if (typeof body === 'string') return [Buffer.from(body, 'utf8')];
  return Buffer.isBuffer(body) ? [body] : body.length > 0 ? body : [Buffer.alloc(0)];
}

export function rawJsonResponse(status: number, json: string | readonly Buffer[], headers: Record<string, string> = {}): ApiResponse {
  return { status, headers: { 'content-type': JSON_TYPE, ...headers }, body: json };
}

export function errorResponse(code: ErrorCode, message: string, headers: Record<string, string> = {}): ApiResponse {
  const body: ErrorBody = { error: { code, message } };
  return jsonResponse(HTTP_STATUS[code], body, headers);
}

export function fromError(err: KnowledgeError): ApiResponse {
  return errorResponse(err.code, err.message, headersFor(err.code));
}

/** Seconds a client should wait before retrying an `unavailable` answer (state or storage unreachable). */
export const RETRY_AFTER_SECONDS = 1;

function headersFor(code: ErrorCode): Record<string, string> {
  if (code === 'unauthorized') return { 'www-authenticate': 'Bearer' };
  if (code === 'unavailable') return { 'retry-after': String(RETRY_AFTER_SECONDS) };
  return {};
}

/** The one answer for "no such file" — also a personal session's denial. */
/** The one missing-file message: a personal session's hidden denial says exactly this too. */
export function notFoundMessage(what: string): string {
  return `no such file: ${what}`;
}

export function notFound(what: string): ApiResponse {
  return errorResponse('not_found', notFoundMessage(what));
}

export function empty(status: number, headers: Record<string, string> = {}): ApiResponse {
  return { status, headers, body: '' };
}

/** `<scope>/<path>` split and validated; scope must be account or team_<id>. */
export interface ScopedPath {
  readonly scope: ScopeName;
  readonly path: string;
}

function invalid(message: string): never {
  throw new KnowledgeError('invalid_argument', message);
}

/** Decodes a raw URL remainder (`team_x/runbooks/a%20b.md`) segment by segment and validates it. */
export function parseEncodedScopePath(raw: string, requirePath: boolean): ScopedPath {
  const segments = raw.split('/').map((s) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(s);
    } catch {
      invalid('invalid path: bad percent-encoding');
    }
    if (decoded.includes('/')) invalid('invalid path: encoded "/" in a name');
    const problem = segmentProblem(decoded);
    if (problem !== null) invalid(`invalid path: ${problem}`);
    return decoded;
  });
  return checkScopedPath(segments, requirePath);
}

/** Validates an already-decoded `<scope>/<path>` (the read route's JSON body). */
export function parseScopePath(path: string): ScopedPath {
  const problem = packPathProblem(path);
  if (problem !== null) invalid(`invalid path: ${problem}`);
  return checkScopedPath(path.split('/'), true);
}

function checkScopedPath(segments: string[], requirePath: boolean): ScopedPath {
  // split() answers at least one segment: the scope is always there, if empty.
  const [scope, ...rest] = segments as [string, ...string[]];
  if (parseScope(scope) === null) invalid(`invalid scope "${scope}" (expected "account" or "team_<id>")`);
  const path = rest.join('/');
  if (!requirePath) {
    if (rest.length > 0) invalid('invalid path: a scope name takes no path');
    return { scope, path: '' };
  }
  const problem = packPathProblem(path);
  if (problem !== null) invalid(`invalid path: ${problem}`);
  return { scope, path };
}
