// The daemon side of POST /v1/batch: the incremental parser (flipped bytes,
// truncation at every offset, garbage, frames out of order, bytes after the
// end), HttpControlClient.batch against a real control plane and through a
// fault proxy, and ContentFetcher.fetchBatch / the prefetcher: verified
// content cached, failures leave files to the per-file path, an open during
// a batch gets its bytes.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tree } from '../src/core/tree/tree.js';
import type { BatchFrameHeader } from '../src/core/wire.js';
import { parseBatchStream, type BatchItem } from '../src/daemon/control-plane/batch-stream.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import type { BatchOptions, ControlClient } from '../src/daemon/control-plane/control-client.js';
import { HttpControlClient } from '../src/daemon/control-plane/http-control-client.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { KnowledgeFilesystem } from '../src/daemon/filesystem.js';
import { GrantCache } from '../src/daemon/content/grant-cache.js';
import { BATCH_BYTES, BATCH_FILES, Prefetcher, splitBatches } from '../src/daemon/content/prefetch.js';
import { DirectoryReadAhead, readAheadBytes } from '../src/daemon/content/read-ahead.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { pathStartsWith, startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

function frames(files: [string, Buffer | null][]): Buffer {
  const parts: Buffer[] = [];
  for (const [path, body] of files) {
    const header: BatchFrameHeader = body === null ? { path, missing: true } : { path, sha256: sha(body), size: body.length };
    parts.push(Buffer.from(`${JSON.stringify(header)}\n`));
    if (body !== null) parts.push(body);
  }
  return Buffer.concat(parts);
}

async function* chunked(buf: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function collect(stream: AsyncIterable<BatchItem>): Promise<{ items: BatchItem[]; error?: unknown }> {
  const items: BatchItem[] = [];
  try {
    for await (const item of stream) items.push(item);
    return { items };
  } catch (error) {
    return { items, error };
  }
}

const A = Buffer.from('alpha\n{"path":"x"}\n');
const B = Buffer.from([0, 10, 10, 255]);
const C = Buffer.alloc(700, 'c');
const FILES: [string, Buffer | null][] = [['a.md', A], ['gone.md', null], ['b.bin', B], ['e.md', Buffer.alloc(0)], ['c.md', C]];
const PATHS = FILES.map(([p]) => p);
const GOOD = frames(FILES);

describe('parseBatchStream', () => {
  it('parses any chunking into verified files and missing markers, in order', async () => {
    for (const size of [1, 2, 3, 7, 64, 4096, GOOD.length]) {
      const { items, error } = await collect(parseBatchStream(chunked(GOOD, size), PATHS, 1 << 20));
      expect(error).toBeUndefined();
      expect(items.map((i) => i.path)).toEqual(PATHS);
      expect(items[1]).toEqual({ path: 'gone.md', missing: true });
      const c = items[4]!;
      expect(!c.missing && c.body.equals(C) && c.sha256 === sha(C)).toBe(true);
    }
  });

  it('a stream cut at any offset fails (unavailable) after yielding only complete, verified files', async () => {
    for (let cut = 0; cut < GOOD.length; cut++) {
      const { items, error } = await collect(parseBatchStream(chunked(GOOD.subarray(0, cut), 5), PATHS, 1 << 20));
      expect(error, `cut at ${cut}`).toMatchObject({ code: 'unavailable' });
      for (const item of items) if (!item.missing) expect(sha(item.body)).toBe(item.sha256);
      expect(items.length).toBeLessThan(PATHS.length);
    }
  });

  it('a flipped byte anywhere fails the batch; nothing yielded has wrong bytes', async () => {
    for (let at = 0; at < GOOD.length; at += 7) {
      const bad = Buffer.from(GOOD);
      bad[at] = bad[at]! ^ 0x01;
      const { items, error } = await collect(parseBatchStream(chunked(bad, 64), PATHS, 1 << 20));
      expect(error, `flip at ${at}`).toBeDefined();
      const original = new Map(FILES);
      for (const item of items) if (!item.missing) expect(item.body.equals(original.get(item.path)!)).toBe(true);
    }
  });

  it('garbage, frames out of order, oversize announcements and trailing bytes are integrity errors', async () => {
    const cases: [string, Buffer, number][] = [
      ['garbage', Buffer.from('<html>oops</html>\n'), 1 << 20],
      ['no newline ever', Buffer.alloc(100_000, 'z'), 1 << 20],
      ['out of order', frames([FILES[2]!, FILES[0]!, ...FILES.slice(1, 2), ...FILES.slice(3)]), 1 << 20],
      ['oversize', GOOD, 100],
      ['trailing bytes', Buffer.concat([GOOD, Buffer.from('x')]), 1 << 20],
      ['bad sha field', Buffer.from(`${JSON.stringify({ path: 'a.md', sha256: 'nothex', size: 1 })}\nx`), 1 << 20],
      ['negative size', Buffer.from(`${JSON.stringify({ path: 'a.md', sha256: sha(''), size: -1 })}\n`), 1 << 20],
    ];
    for (const [name, buf, max] of cases) {
      const { error } = await collect(parseBatchStream(chunked(buf, 4096), PATHS, max));
      expect(error, name).toMatchObject({ code: 'integrity' });
    }
  });
});

describe('batch over HTTP', () => {
  let dir: string;
  let cp: TestControlPlane;
  let proxy: FaultProxy;
  let token: string;
  const files: Record<string, string> = {};
  for (let i = 0; i < 120; i++) files[`teams/payments/notes/n${String(i).padStart(3, '0')}.md`] = `note ${i}\n${'line\n'.repeat(i * 20)}`;

  beforeAll(async () => {
    dir = await makeDataDir({
      teams: { payments: 'Payments', storage: 'Storage' },
      users: { alice: { teams: ['payments'] } },
      files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n', 'teams/storage/DUTY.md': '# Storage\n', ...files },
    });
    cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 60_000 });
    proxy = await startFaultProxy(cp.url);
    token = (await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' })).token;
  });
  afterAll(async () => {
    await proxy?.close();
    await cp?.close();
    await removeDataDir(dir);
  });

  const client = (url = cp.url) => new HttpControlClient({ serverUrl: url, token, requestTimeoutMs: 5000 });
  const planTree = async (c: ControlClient) => Tree.fromPlan((await c.plan({ threshold: 1 << 30 }))!, undefined, { uid: 0, gid: 0, emptyDirMtimeMs: 0 });

  it('client.batch yields every file verified, and denial/not-found errors for refused scopes', async () => {
    const c = client();
    try {
      const paths = ['DUTY.md', 'notes/n005.md', 'missing.md'];
      const { items, error } = await collect(c.batch(`team_payments`, paths, { maxFileBytes: 1 << 20 }));
      expect(error).toBeUndefined();
      expect(items.map((i) => [i.path, i.missing])).toEqual([['DUTY.md', false], ['notes/n005.md', false], ['missing.md', true]]);
      const first = items[0]!;
      expect(!first.missing && first.body.toString()).toBe('# Payments\n');
      const denied = await collect(c.batch('team_storage', ['DUTY.md'], { maxFileBytes: 1 << 20 }));
      expect(denied.error).toMatchObject({ code: 'not_found' });
    } finally {
      await c.close();
    }
  });

  it('through a proxy that flips, truncates or garbles batch bodies: the client fails the batch, never yields wrong bytes', async () => {
    const c = client(proxy.url);
    const tree = await planTree(c);
    const notes = [...tree.files()].filter((f) => f.scope === 'team_payments');
    const opts: BatchOptions = { maxFileBytes: 1 << 20 };
    try {
      for (const mode of [{ kind: 'flip' }, { kind: 'truncate' }, { kind: 'garbage' }, { kind: 'status', status: 502 }] as const) {
        proxy.setRules([{ mode, match: pathStartsWith('/v1/batch') }]);
        const { items, error } = await collect(c.batch('team_payments', notes.map((n) => n.scopePath), opts));
        expect(error, mode.kind).toBeDefined();
        const bySha = new Map(notes.map((n) => [n.scopePath, n.sha256]));
        for (const item of items) if (!item.missing) expect(sha(item.body)).toBe(bySha.get(item.path));
      }
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });

  /** The daemon's open path with read-ahead, no prefetch: what `grep -r` meets with --prefetch-content off. */
  async function openPath(c: ControlClient) {
    const tree = await planTree(c);
    const fetcher = new ContentFetcher({ client: c, cache: new ContentCache({ maxBytes: 64 << 20 }) });
    const readAhead = new DirectoryReadAhead({ fetcher, tree: () => tree, maxFiles: BATCH_FILES, maxBytes: BATCH_BYTES });
    const fs = new KnowledgeFilesystem({ tree: () => tree, grants: new GrantCache(c, 5000), fetcher, readAhead, requestTimeoutMs: 5000 });
    const readAll = async (path: string) => {
      const fd = await fs.open(path, 0);
      const buf = Buffer.alloc(1 << 20);
      const n = fs.read(fd, buf, buf.length, 0);
      fs.release(fd);
      return buf.subarray(0, n);
    };
    return { tree, fetcher, readAhead, readAll };
  }

  it('read-ahead: opening the files of a directory in order costs one file request and one batch; a lone open reads nothing ahead', async () => {
    const c = client(proxy.url);
    try {
      const { tree, fetcher, readAhead, readAll } = await openPath(c);
      proxy.resetCounts();
      expect((await readAll('/team_payments/DUTY.md')).toString()).toBe('# Payments\n');
      expect([fetcher.fetches, readAhead.started]).toEqual([1, 0]);

      const notes = tree.readdirNames('/team_payments/notes')!.map((n) => `/team_payments/notes/${n}`);
      for (const path of notes) {
        const node = tree.get(path)!;
        expect(sha(await readAll(path)), path).toBe(node.kind === 'file' ? node.sha256 : '');
      }
      // The first note was a miss like DUTY.md's (another directory); the second started one read-ahead of the rest.
      expect(readAhead.started).toBe(1);
      expect(fetcher.fetches).toBe(2);
      expect(proxy.count((r) => r.url.startsWith('/v1/batch'))).toBe(1);
      expect(proxy.count((r) => r.url.startsWith('/v1/files/'))).toBe(2);
    } finally {
      await c.close();
    }
  });

  it('read-ahead only takes what the cache can keep: a quarter of memory, the batch bound with --cache-dir, none without room', () => {
    expect(readAheadBytes(4 << 20, 256 << 20, false)).toBe(4 << 20);
    expect(readAheadBytes(4 << 20, 1 << 20, false)).toBe(256 << 10);
    expect(readAheadBytes(4 << 20, 0, false)).toBe(0);
    expect(readAheadBytes(4 << 20, 16 << 10, false)).toBe(0);
    expect(readAheadBytes(4 << 20, 0, true)).toBe(4 << 20);
  });

  it('read-ahead through a proxy that corrupts batches: every open still gets exactly its bytes, and read-ahead pauses after the failure', async () => {
    const c = client(proxy.url);
    try {
      const { tree, fetcher, readAhead, readAll } = await openPath(c);
      proxy.resetCounts();
      proxy.setRules([{ mode: { kind: 'flip' }, match: pathStartsWith('/v1/batch') }]);
      // The flip lands mid-body: files before it arrive by the batch, the rest one by one.
      for (const name of tree.readdirNames('/team_payments/notes')!) {
        const node = tree.get(`/team_payments/notes/${name}`)!;
        expect(sha(await readAll(node.path))).toBe(node.kind === 'file' ? node.sha256 : '');
      }
      expect(readAhead.started).toBe(1);
      expect(proxy.count((r) => r.url.startsWith('/v1/batch'))).toBe(1);
      expect(fetcher.fetches).toBeGreaterThan(2);
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });

  it('prefetch by batches: every file cached and verified, far fewer requests than files', async () => {
    const c = client(proxy.url);
    const cache = new ContentCache({ maxBytes: 64 << 20 });
    const fetcher = new ContentFetcher({ client: c, cache });
    const logs: string[] = [];
    const prefetch = new Prefetcher({ fetcher, cacheBytes: 64 << 20, hasDiskCache: false, log: (l) => logs.push(l) });
    try {
      const tree = await planTree(c);
      proxy.resetCounts();
      await prefetch.schedule(tree);
      for (const f of tree.files()) expect(sha(cache.getMemory(f.sha256)!)).toBe(f.sha256);
      expect(fetcher.fetches).toBe(0);
      expect(proxy.count((r) => r.url.startsWith('/v1/batch'))).toBe(splitBatches([...tree.files()]).length);
      expect(logs.at(-1)).toMatch(new RegExp(`^prefetch: ${tree.fileCount}/${tree.fileCount} files .*: done$`));
    } finally {
      await c.close();
    }
  });

  it('a corrupted batch falls back to per-file fetches: everything still cached, nothing wrong', async () => {
    const c = client(proxy.url);
    const cache = new ContentCache({ maxBytes: 64 << 20 });
    const fetcher = new ContentFetcher({ client: c, cache });
    const logs: string[] = [];
    const prefetch = new Prefetcher({ fetcher, cacheBytes: 64 << 20, hasDiskCache: false, log: (l) => logs.push(l) });
    try {
      const tree = await planTree(c);
      proxy.setRules([{ mode: { kind: 'flip' }, match: pathStartsWith('/v1/batch') }]);
      await prefetch.schedule(tree);
      for (const f of tree.files()) expect(sha(cache.getMemory(f.sha256)!)).toBe(f.sha256);
      expect(fetcher.fetches).toBeGreaterThan(0);
      expect(logs.some((l) => l.includes('a batch failed'))).toBe(true);
      expect(logs.at(-1)).toMatch(/: done$/);
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });

  it('an open while its batch is in flight waits for the batch (no second fetch) and gets verified bytes', async () => {
    const c = client(proxy.url);
    const cache = new ContentCache({ maxBytes: 64 << 20 });
    const fetcher = new ContentFetcher({ client: c, cache });
    try {
      const tree = await planTree(c);
      const notes = [...tree.files()].filter((f) => f.scope === 'team_payments');
      proxy.setRules([{ mode: { kind: 'delay', ms: 300 }, match: pathStartsWith('/v1/batch') }]);
      const batch = fetcher.fetchBatch('team_payments', notes);
      const target = notes[7]!;
      const opened = await fetcher.get(target);
      expect(sha(opened)).toBe(target.sha256);
      expect(fetcher.fetches).toBe(0);
      expect((await batch).fetched.length).toBe(notes.length);
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });

  it('an open of a file a stalled prefetch batch holds fetches it itself at once; the batch still delivers', async () => {
    const c = client(proxy.url);
    const cache = new ContentCache({ maxBytes: 64 << 20 });
    const fetcher = new ContentFetcher({ client: c, cache });
    try {
      const tree = await planTree(c);
      const notes = [...tree.files()].filter((f) => f.scope === 'team_payments');
      proxy.setRules([{ mode: { kind: 'delay', ms: 3000 }, match: pathStartsWith('/v1/batch') }]);
      let batchDone = false;
      const batch = fetcher.fetchBatch('team_payments', notes, undefined, true).finally(() => {
        batchDone = true;
      });
      const target = notes[7]!;
      const opened = await fetcher.get(target);
      expect(sha(opened)).toBe(target.sha256);
      expect(batchDone, 'the open did not wait for the prefetch batch').toBe(false);
      expect(fetcher.fetches).toBe(1);
      expect((await batch).fetched.length).toBe(notes.length);
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });

  it('an open waiting on a batch that fails is served by the per-file path', async () => {
    const c = client(proxy.url);
    const cache = new ContentCache({ maxBytes: 64 << 20 });
    const fetcher = new ContentFetcher({ client: c, cache });
    try {
      const tree = await planTree(c);
      const notes = [...tree.files()].filter((f) => f.scope === 'team_payments');
      proxy.setRules([{ mode: { kind: 'status', status: 502 }, match: pathStartsWith('/v1/batch') }]);
      const batch = fetcher.fetchBatch('team_payments', notes);
      const target = notes.at(-1)!;
      const opened = await fetcher.get(target);
      expect(sha(opened)).toBe(target.sha256);
      const outcome = await batch;
      expect(outcome.error).toMatchObject({ code: 'unavailable' });
      expect(outcome.unanswered.length).toBe(notes.length);
      expect(fetcher.fetches).toBe(1);
    } finally {
      proxy.setRules([]);
      await c.close();
    }
  });
});
