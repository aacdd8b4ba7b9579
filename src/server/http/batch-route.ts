// POST /v1/batch: many files of one scope in one streamed answer, so a
// daemon's content prefetch costs a request per few hundred files instead of
// one per file.
//
// Order is the same security property as GET /v1/files: parse and validate
// the whole request, decide CanLoadScope ONCE (action "open", one audit
// record per batch) and only then touch the pack store. A denial is exactly
// the answer GET /v1/grants/<scope> gives (personal → the byte-identical
// not-found, team → 403 guidance, membership failure → 503).
//
// The body is a stream (BATCH_CONTENT_TYPE, see wire.ts): for each requested
// path in order, one JSON header line, then exactly `size` bytes. Each
// header's sha256 comes from the store's `read`, which hashes the very bytes
// it returns, so the hash always describes what is sent. Small files are read
// through the store's synchronous path when it has one (`readSmallSync`: same
// checks, a fraction of the CPU of one promise per fs call), yielding to other
// requests every SLICE_MS. Memory is bounded:
// reads run ahead of the socket by at most READ_AHEAD_BYTES (plus one file),
// and the HTTP layer waits for `drain` before asking for more. A store error
// mid-stream cuts the connection: the client sees a truncated batch, never a
// frame with wrong bytes.
//
// The request body is a JSON list of paths under the server's ordinary body
// limit (64 KiB by default); BATCH_MAX_PATHS caps the count. Clients size
// their batches to fit both (see prefetch.ts).

import { KnowledgeError } from '../../core/errors.js';
import { CONTROL_PLANE_METRICS } from '../../core/metrics.js';
import { packPathProblem } from '../../core/paths.js';
import type { PlanFile, ScopeSnapshot } from '../../core/session/plan.js';
import { parseScope, type ScopeName } from '../../core/scope.js';
import { BATCH_CONTENT_TYPE, BATCH_MAX_PATHS, type BatchFrameHeader, type BatchRequest } from '../../core/wire.js';
import type { ApiRequest, ApiResponse } from './api.js';
import { decider, denialResponse, type RouteContext } from '../context.js';
import type { PackFile } from '../../store/pack-store.js';
import type { SessionRecord } from '../state/session-state.js';
import { releasingAtEnd } from './prefetch-slots.js';

/** Bytes read from the store ahead of what the socket has taken. */
const READ_AHEAD_BYTES = 4 * 1024 * 1024;
const READ_AHEAD_FILES = 16;
/** Frames are gathered into chunks of about this size before being written. */
const CHUNK_BYTES = 64 * 1024;
/** Longest stretch of synchronous small-file reads before yielding to other requests. */
const SLICE_MS = 8;

function invalid(message: string): never {
  throw new KnowledgeError('invalid_argument', message);
}

export function parseBatchRequest(body: Buffer): BatchRequest & { readonly scope: ScopeName } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    invalid('request body must be JSON like {"scope": "team_x", "paths": ["DUTY.md"]}');
  }
  const v = value as { scope?: unknown; paths?: unknown } | null;
  if (typeof v !== 'object' || v === null) invalid('request body must be a JSON object with "scope" and "paths"');
  if (typeof v.scope !== 'string' || parseScope(v.scope) === null) {
    invalid(`invalid scope "${String(v.scope)}" (expected "account" or "team_<id>")`);
  }
  if (!Array.isArray(v.paths) || v.paths.length === 0) invalid('"paths" must be a non-empty list of paths inside the scope');
  if (v.paths.length > BATCH_MAX_PATHS) invalid(`"paths" has ${v.paths.length} entries; at most ${BATCH_MAX_PATHS} per batch`);
  const paths: string[] = [];
  for (const [i, p] of (v.paths as unknown[]).entries()) {
    if (typeof p !== 'string') invalid(`"paths"[${i}] must be a string`);
    const problem = packPathProblem(p);
    if (problem !== null) invalid(`invalid path "paths"[${i}]: ${problem}`);
    paths.push(p);
  }
  return { scope: v.scope, paths };
}

function plannedSize(snapshot: ScopeSnapshot | undefined, path: string): number {
  const files = snapshot?.files ?? [];
  let lo = 0;
  let hi = files.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const f = files[mid] as PlanFile;
    if (f.path === path) return f.size;
    if (f.path < path) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}

type Outcome = { readonly file: PackFile | null } | { readonly error: unknown };

/** The store's synchronous path for small files, when it has one (undefined: use `read`). */
function readQuick(ctx: RouteContext, scope: ScopeName, path: string, parents: Map<string, string | null>): Outcome | undefined {
  if (ctx.store.readSmallSync === undefined) return undefined;
  try {
    const file = ctx.store.readSmallSync(scope, path, parents);
    return file === undefined ? undefined : { file };
  } catch (error) {
    return { error };
  }
}

/** The frames of one allowed batch, gathered into chunks; reads run ahead within a byte budget. */
async function* batchFrames(ctx: RouteContext, scope: ScopeName, paths: readonly string[], signal: AbortSignal): AsyncGenerator<Buffer> {
  const snapshot = ctx.store.snapshot(scope);
  const parents = new Map<string, string | null>();
  const pending: { path: string; size: number; outcome: Promise<Outcome> }[] = [];
  let aheadBytes = 0;
  let next = 0;
  const fill = () => {
    while (next < paths.length && pending.length < READ_AHEAD_FILES && (pending.length === 0 || aheadBytes < READ_AHEAD_BYTES)) {
      const path = paths[next++] as string;
      const size = plannedSize(snapshot, path);
      aheadBytes += size;
      const quick = readQuick(ctx, scope, path, parents);
      if (quick !== undefined) {
        pending.push({ path, size, outcome: Promise.resolve(quick) });
        continue;
      }
      // Settled into a value at once: an abandoned read never becomes an unhandled rejection.
      const outcome = ctx.store.read(scope, path).then(
        (file): Outcome => ({ file }),
        (error: unknown): Outcome => ({ error }),
      );
      pending.push({ path, size, outcome });
    }
  };
  let parts: Buffer[] = [];
  let partBytes = 0;
  let sliceStart = performance.now();
  while (!signal.aborted) {
    // Synchronous reads must not hold the event loop: let other requests in every SLICE_MS.
    if (performance.now() - sliceStart > SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
    fill();
    const head = pending.shift();
    if (head === undefined) break;
    const outcome = await head.outcome;
    aheadBytes -= head.size;
    if ('error' in outcome) throw outcome.error;
    const file = outcome.file;
    const header: BatchFrameHeader = file === null ? { path: head.path, missing: true } : { path: head.path, sha256: file.sha256, size: file.bytes.length };
    const line = Buffer.from(`${JSON.stringify(header)}\n`, 'utf8');
    parts.push(line);
    partBytes += line.length;
    if (file !== null) {
      parts.push(file.bytes);
      partBytes += file.bytes.length;
    }
    if (partBytes >= CHUNK_BYTES) {
      yield parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, partBytes);
      parts = [];
      partBytes = 0;
    }
  }
  if (partBytes > 0 && !signal.aborted) yield Buffer.concat(parts, partBytes);
}

export async function batchRoute(ctx: RouteContext, session: SessionRecord, req: ApiRequest): Promise<ApiResponse> {
  const { scope, paths } = parseBatchRequest(req.body);
  // A prefetch batch is shed before it is decided (no audit record for work not done) when its slots are taken.
  const release = req.prefetch === true ? ctx.prefetchSlots.take() : undefined;
  if (req.prefetch === true && release === undefined) {
    ctx.metrics.inc(CONTROL_PLANE_METRICS.prefetchShed, {});
    return ctx.prefetchSlots.shedResponse();
  }
  try {
    const decision = await decider(ctx, session).decide(scope, 'open');
    if (!decision.allowed) {
      release?.();
      return denialResponse(session, decision, scope);
    }
  } catch (err) {
    release?.();
    throw err;
  }
  const frames = batchFrames(ctx, scope, paths, req.signal);
  // A client gone before the stream started never runs the generator's `finally`: its abort releases too.
  if (release !== undefined) req.signal.addEventListener('abort', release, { once: true });
  return {
    status: 200,
    headers: { 'content-type': BATCH_CONTENT_TYPE },
    // Stryker disable next-line StringLiteral: the adapter sends the stream of a response that has one; its body is never read
    body: '',
    stream: release === undefined ? frames : releasingAtEnd(frames, release),
  };
}
