// POST /v1/batch over a stand-in context and store: each refusal of a bad
// body word for word; reads that run ahead of the socket by at most 16 files
// and 4 MiB (by the sizes the snapshot plans); frames gathered into chunks of
// 64 KiB; a long run of synchronous reads yielding to other requests; a read
// error ending the stream; and a prefetch batch's slot, shed when none is
// free and released when the stream ends or the client leaves. The frames'
// bytes and the decision's order are in server-batch.test.ts.

import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { NO_METRICS } from '../src/core/metrics.js';
import type { ScopeSnapshot } from '../src/core/session/plan.js';
import { BATCH_MAX_PATHS } from '../src/core/wire.js';
import type { RouteContext } from '../src/server/context.js';
import type { ApiRequest, ApiResponse } from '../src/server/http/api.js';
import { batchRoute, parseBatchRequest } from '../src/server/http/batch-route.js';
import { PrefetchSlots } from '../src/server/http/prefetch-slots.js';
import type { SessionRecord } from '../src/server/state/session-state.js';
import type { PackFile, PackStore } from '../src/store/pack-store.js';

const session: SessionRecord = { id: 's1', kind: 'personal', creator: 'alice', tokenHash: 'h', revoked: false, mounted: [], readSet: [], createdAt: '2026-01-01T00:00:00.000Z' };
const MiB = 1024 * 1024;

const fileOf = (path: string, size: number): PackFile => ({ path, size, sha256: 'a'.repeat(64), bytes: Buffer.alloc(size, path.length % 256) }) as unknown as PackFile;

/** `files`: path → size, the snapshot's plan; the store answers `read` through `reader`. */
function contextOf(files: Record<string, number>, store: Partial<PackStore>, slots = new PrefetchSlots(4)) {
  const snapshot = { scope: 'account', version: 'v1', totalBytes: 0, files: Object.entries(files).map(([path, size]) => ({ path, size, sha256: 'a'.repeat(64) })).sort((a, b) => (a.path < b.path ? -1 : 1)) } as unknown as ScopeSnapshot;
  const ctx = {
    options: { now: () => 0, replicaId: 'r' },
    audit: { append: () => undefined },
    metrics: NO_METRICS,
    membership: { teamsOf: async () => ({ status: 'ok', teams: [] }) },
    prefetchSlots: slots,
    store: { snapshot: () => snapshot, ...store },
  } as unknown as RouteContext;
  return ctx;
}

const request = (body: unknown, extra: Partial<ApiRequest> = {}) =>
  ({ body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), signal: new AbortController().signal, ...extra }) as ApiRequest;

async function drain(res: ApiResponse): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of res.stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return chunks;
}

describe('parseBatchRequest', () => {
  const refusal = (body: string) => {
    try {
      parseBatchRequest(Buffer.from(body));
    } catch (err) {
      expect(err).toBeInstanceOf(KnowledgeError);
      expect((err as KnowledgeError).code).toBe('invalid_argument');
      return (err as Error).message;
    }
    throw new Error(`accepted ${body}`);
  };

  it('names what is wrong with the body, word for word', () => {
    expect(refusal('{')).toBe('request body must be JSON like {"scope": "team_x", "paths": ["DUTY.md"]}');
    expect(refusal('null')).toBe('request body must be a JSON object with "scope" and "paths"');
    expect(refusal('5')).toBe('request body must be a JSON object with "scope" and "paths"');
    expect(refusal('{"paths": ["a"]}')).toBe('invalid scope "undefined" (expected "account" or "team_<id>")');
    expect(refusal('{"scope": "teams", "paths": ["a"]}')).toBe('invalid scope "teams" (expected "account" or "team_<id>")');
    expect(refusal('{"scope": "account"}')).toBe('"paths" must be a non-empty list of paths inside the scope');
    expect(refusal('{"scope": "account", "paths": []}')).toBe('"paths" must be a non-empty list of paths inside the scope');
    expect(refusal('{"scope": "account", "paths": "DUTY.md"}')).toBe('"paths" must be a non-empty list of paths inside the scope');
    expect(refusal('{"scope": "account", "paths": ["a", 7]}')).toBe('"paths"[1] must be a string');
    expect(refusal('{"scope": "account", "paths": ["a", "../b"]}')).toMatch(/^invalid path "paths"\[1\]: \S/);
    const many = JSON.stringify({ scope: 'account', paths: Array.from({ length: BATCH_MAX_PATHS + 1 }, (_, i) => `f${i}`) });
    expect(refusal(many)).toBe(`"paths" has ${BATCH_MAX_PATHS + 1} entries; at most ${BATCH_MAX_PATHS} per batch`);
  });

  it('takes exactly the most paths a batch may hold', () => {
    const paths = Array.from({ length: BATCH_MAX_PATHS }, (_, i) => `f${i}`);
    expect(parseBatchRequest(Buffer.from(JSON.stringify({ scope: 'team_x', paths })))).toEqual({ scope: 'team_x', paths });
  });
});

describe('reading ahead', () => {
  /** A store whose reads wait until released; records how many were started when the first frame was taken. */
  function slowStore() {
    const started: string[] = [];
    const waiting: (() => void)[] = [];
    return {
      started,
      releaseAll: () => waiting.splice(0).forEach((go) => go()),
      store: {
        read: (_scope: string, path: string) => {
          started.push(path);
          return new Promise<PackFile>((resolve) => waiting.push(() => resolve(fileOf(path, 10))));
        },
      } as Partial<PackStore>,
    };
  }

  it('starts at most 16 reads at once', async () => {
    const paths = Array.from({ length: 40 }, (_, i) => `f${String(i).padStart(2, '0')}`);
    const slow = slowStore();
    const ctx = contextOf(Object.fromEntries(paths.map((p) => [p, 10])), slow.store);
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths }));
    const it = (res.stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    const first = it.next();
    await new Promise((r) => setTimeout(r, 20));
    expect(slow.started).toHaveLength(16);
    // Each frame taken makes room for one more read.
    const pump = setInterval(slow.releaseAll, 1);
    try {
      await first;
      for (;;) if ((await it.next()).done) break;
    } finally {
      clearInterval(pump);
    }
    expect(slow.started).toEqual(paths);
  });

  it('starts no more reads than fit 4 MiB by the planned sizes (and always one)', async () => {
    // Planned sizes from the snapshot, looked up by path: 3 MiB, 3 MiB, then small ones.
    const sizes: Record<string, number> = { 'a.bin': 3 * MiB, 'b.bin': 3 * MiB, 'c.txt': 10, 'd.txt': 10 };
    const slow = slowStore();
    const ctx = contextOf(sizes, slow.store);
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths: Object.keys(sizes) }));
    // Read to the end in the background, while the test lets the reads finish.
    const done = drain(res);
    await new Promise((r) => setTimeout(r, 20));
    expect(slow.started).toEqual(['a.bin', 'b.bin']);
    slow.releaseAll();
    await new Promise((r) => setTimeout(r, 20));
    // a.bin's frame was taken: 3 MiB ahead (b.bin), so c.txt and d.txt fit.
    expect(slow.started).toEqual(['a.bin', 'b.bin', 'c.txt', 'd.txt']);
    const pump = setInterval(slow.releaseAll, 1);
    await done.finally(() => clearInterval(pump));
  });

  it('a path the snapshot does not plan counts as empty', async () => {
    const slow = slowStore();
    const ctx = contextOf({ 'm.txt': 5 * MiB }, slow.store);
    const paths = ['a.txt', 'b.txt', 'm.txt', 'z.txt'];
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths }));
    // Read to the end in the background, while the test lets the reads finish.
    const done = drain(res);
    await new Promise((r) => setTimeout(r, 20));
    // a and b are unplanned (0 bytes), m is 5 MiB: z waits until m's frame is taken.
    expect(slow.started).toEqual(['a.txt', 'b.txt', 'm.txt']);
    const pump = setInterval(slow.releaseAll, 1);
    await done.finally(() => clearInterval(pump));
    expect(slow.started).toEqual(paths);
  });
});

describe('the stream', () => {
  it('gathers frames into chunks of at least 64 KiB, and sends the rest at the end', async () => {
    const paths = Array.from({ length: 100 }, (_, i) => `f${String(i).padStart(3, '0')}`);
    const ctx = contextOf(Object.fromEntries(paths.map((p) => [p, 1000])), { readSmallSync: (_s, path) => fileOf(path, 1000), read: async () => null });
    const chunks = await drain(await batchRoute(ctx, session, request({ scope: 'account', paths })));
    const frame = (i: number) => `{"path":"${paths[i]}","sha256":"${'a'.repeat(64)}","size":1000}\n`.length + 1000;
    const total = paths.reduce((n, _, i) => n + frame(i), 0);
    expect(chunks.reduce((n, c) => n + c.length, 0)).toBe(total);
    const perChunk = Math.ceil(65536 / frame(0));
    expect(chunks.map((c) => c.length)).toEqual([perChunk * frame(0), total - perChunk * frame(0)]);
  });

  it('sends one file of 64 KiB or more as its own chunk, and a missing one as a header', async () => {
    const ctx = contextOf({ big: 70_000 }, { read: async (_s, path) => (path === 'big' ? fileOf('big', 70_000) : null) });
    const chunks = await drain(await batchRoute(ctx, session, request({ scope: 'account', paths: ['big', 'gone'] })));
    expect(chunks).toHaveLength(2);
    expect(chunks[1]?.toString()).toBe('{"path":"gone","missing":true}\n');
    expect(chunks[0]?.length).toBe(`{"path":"big","sha256":"${'a'.repeat(64)}","size":70000}\n`.length + 70_000);
  });

  it('reads through read() when the synchronous path declines a file', async () => {
    const used: string[] = [];
    const ctx = contextOf({}, {
      readSmallSync: (_s, path) => (used.push(`sync ${path}`), path === 'small' ? fileOf(path, 3) : undefined),
      read: async (_s, path) => (used.push(`read ${path}`), fileOf(path, 4)),
    });
    await drain(await batchRoute(ctx, session, request({ scope: 'account', paths: ['small', 'large'] })));
    expect(used).toEqual(['sync small', 'sync large', 'read large']);
  });

  it('ends with the error of a read that fails, from either path', async () => {
    const failing = new Error('disk gone');
    const viaRead = contextOf({}, { read: () => Promise.reject(failing) });
    await expect(drain(await batchRoute(viaRead, session, request({ scope: 'account', paths: ['a'] })))).rejects.toBe(failing);
    const viaSync = contextOf({}, {
      readSmallSync: () => {
        throw failing;
      },
      read: async () => null,
    });
    await expect(drain(await batchRoute(viaSync, session, request({ scope: 'account', paths: ['a'] })))).rejects.toBe(failing);
  });

  it('lets other work in during a long run of synchronous reads', async () => {
    // Reads are started 16 at a time; 1 ms of work each passes the 8 ms slice within the first 16.
    const paths = Array.from({ length: 48 }, (_, i) => `f${i}`);
    let ranBetween = false;
    let reads = 0;
    const ctx = contextOf({}, {
      readSmallSync: (_s, path) => {
        const until = performance.now() + 1;
        while (performance.now() < until);
        reads++;
        return fileOf(path, 1);
      },
      read: async () => null,
    });
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths }));
    let readsWhenOtherRan = -1;
    setImmediate(() => {
      ranBetween = true;
      readsWhenOtherRan = reads;
    });
    await drain(res);
    expect(ranBetween).toBe(true);
    expect(readsWhenOtherRan).toBeGreaterThan(0);
    expect(readsWhenOtherRan).toBeLessThan(paths.length);
  });

  it('stops reading once the client is gone', async () => {
    const controller = new AbortController();
    const paths = Array.from({ length: 30 }, (_, i) => `f${i}`);
    let reads = 0;
    const ctx = contextOf({}, { readSmallSync: (_s, path) => (reads++, fileOf(path, 40_000)), read: async () => null });
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths }, { signal: controller.signal }));
    const chunks: Buffer[] = [];
    for await (const chunk of res.stream as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      controller.abort();
    }
    expect(chunks).toHaveLength(1);
    expect(reads).toBeLessThan(paths.length);
  });
});

describe('prefetch slots', () => {
  it('sheds a prefetch batch when no slot is free, before deciding anything', async () => {
    const slots = new PrefetchSlots(1);
    const hold = slots.take();
    const ctx = contextOf({}, { read: async () => null }, slots);
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths: ['a'] }, { prefetch: true }));
    expect(res.status).toBe(503);
    expect(res.headers?.['retry-after']).toBe('1');
    hold?.();
    // A batch nobody marked as prefetch is served whatever the slots.
    slots.take();
    expect((await batchRoute(ctx, session, request({ scope: 'account', paths: ['a'] }))).status).toBe(200);
  });

  it('holds a slot while the stream runs, and frees it at the end or when the client leaves first', async () => {
    const slots = new PrefetchSlots(2);
    const ctx = contextOf({}, { read: async (_s, path) => fileOf(path, 1) }, slots);
    const res = await batchRoute(ctx, session, request({ scope: 'account', paths: ['a'] }, { prefetch: true }));
    expect(res.status).toBe(200);
    expect(res.body).toBe('');
    expect(slots.busy).toBe(1);
    await drain(res);
    expect(slots.busy).toBe(0);

    const controller = new AbortController();
    await batchRoute(ctx, session, request({ scope: 'account', paths: ['a'] }, { prefetch: true, signal: controller.signal }));
    expect(slots.busy).toBe(1);
    // Gone before the stream was ever read: the generator never runs, the abort frees the slot.
    controller.abort();
    expect(slots.busy).toBe(0);
  });

  it('frees the slot of a batch it refuses', async () => {
    const slots = new PrefetchSlots(1);
    const denied = { ...contextOf({}, { read: async () => null }, slots), membership: { teamsOf: async () => ({ status: 'ok', teams: [] }) } } as RouteContext;
    const res = await batchRoute(denied, session, request({ scope: 'team_ops', paths: ['a'] }, { prefetch: true }));
    expect(res.status).toBe(404);
    expect(slots.busy).toBe(0);
    const failing = { ...denied, membership: { teamsOf: () => Promise.reject(new Error('boom')) } } as RouteContext;
    const outcome = await batchRoute(failing, session, request({ scope: 'team_ops', paths: ['a'] }, { prefetch: true })).catch((err: unknown) => err);
    expect(outcome instanceof Error || (outcome as ApiResponse).status === 503).toBe(true);
    expect(slots.busy).toBe(0);
  });
});
