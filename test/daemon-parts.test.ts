// The daemon's smaller parts in-process: the content cache (memory bound,
// verified disk spill, corrupt files refetched), grants (TTL with an
// injected clock, coalescing), the errno table and the adapter's EROFS
// table, FUSE availability messages, and /proc/mounts parsing.

import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { constants as osConstants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ERROR_CODES, KnowledgeError } from '../src/core/errors.js';
import { Tree } from '../src/core/tree/tree.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import { sha256Hex } from '../src/core/sha256.js';
import { ERRNO_FOR_CODE, ErrnoMapper } from '../src/daemon/fuse/errno.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { KnowledgeFilesystem } from '../src/daemon/filesystem.js';
import { describeFuseProblems, fuseProblems, type FuseProbe } from '../src/daemon/fuse/fuse-check.js';
import { buildOps, WRITE_OPS } from '../src/daemon/fuse/fuse-adapter.js';
import { GrantCache } from '../src/daemon/content/grant-cache.js';
import { parseMounts } from '../src/daemon/fuse/stale-mount.js';
import { FakeControlClient } from './helpers/fake-control-client.js';

const E = osConstants.errno;
const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) {
    await chmod(d, 0o700).catch(() => undefined);
    await rm(d, { recursive: true, force: true });
  }
});
const tempDir = async () => {
  const d = await mkdtemp(join(tmpdir(), 'kfs-cache-test-'));
  dirs.push(d);
  return d;
};

describe('ContentCache', () => {
  it('keeps memory within --cache-size, evicting least recently used', () => {
    const cache = new ContentCache({ maxBytes: 250 });
    const bufs = [0, 1, 2].map((i) => Buffer.alloc(100, i));
    bufs.forEach((b) => cache.put(sha256Hex(b), b));
    expect(cache.stats().bytes).toBeLessThanOrEqual(250);
    expect(cache.getMemory(sha256Hex(bufs[0]!))).toBeUndefined();
    expect(cache.getMemory(sha256Hex(bufs[2]!))).toEqual(bufs[2]);
  });

  it('spills to --cache-dir and reads it back verified after a restart', async () => {
    const dir = await tempDir();
    const buf = Buffer.from('persisted bytes');
    const first = new ContentCache({ maxBytes: 1000, dir });
    first.put(sha256Hex(buf), buf);
    await first.whenWritten();
    const second = new ContentCache({ maxBytes: 1000, dir });
    expect(second.getMemory(sha256Hex(buf))).toBeUndefined();
    expect(await second.get(sha256Hex(buf))).toEqual(buf);
  });

  it('a corrupt cache file is detected by hash, deleted, and the fetcher refetches', async () => {
    const dir = await tempDir();
    const client = new FakeControlClient();
    client.put('account/a.md', 'the real bytes\n');
    const tree = Tree.fromPlan(client.currentPlan(), undefined);
    const node = tree.fileByScopePath('account/a.md')!;
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 0, dir, log: (l) => logs.push(l) });
    await new ContentFetcher({ client, cache }).get(node);
    await cache.whenWritten();
    const file = cache.pathFor(node.sha256);
    await writeFile(file, 'the fake bytes\n');
    const fresh = new ContentCache({ maxBytes: 0, dir, log: (l) => logs.push(l) });
    const got = await new ContentFetcher({ client, cache: fresh }).get(node);
    expect(got.toString()).toBe('the real bytes\n');
    expect(client.calls.file).toBe(2);
    expect(logs.join('\n')).toContain('does not match its sha256');
    await fresh.whenWritten();
    expect((await fresh.get(node.sha256))?.toString()).toBe('the real bytes\n');
  });

  it('the disk side is bounded by --cache-dir-size: least recently used files are deleted; files of earlier runs count', async () => {
    const dir = await tempDir();
    const bufs = [0, 1, 2, 3].map((i) => Buffer.alloc(100, i));
    const first = new ContentCache({ maxBytes: 0, dir, dirMaxBytes: 250 });
    first.put(sha256Hex(bufs[0]!), bufs[0]!);
    first.put(sha256Hex(bufs[1]!), bufs[1]!);
    await first.whenWritten();
    first.put(sha256Hex(bufs[2]!), bufs[2]!); // evicts bufs[0] from disk
    await first.whenWritten();
    expect(first.stats().diskBytes).toBeLessThanOrEqual(250);
    expect(await first.get(sha256Hex(bufs[0]!))).toBeUndefined();
    expect(await first.get(sha256Hex(bufs[2]!))).toEqual(bufs[2]);
    // A new run indexes what is there before adding more.
    await mkdir(join(dir, 'ab'), { recursive: true });
    await writeFile(join(dir, 'ab', 'leftover.tmp'), 'partial');
    const second = new ContentCache({ maxBytes: 0, dir, dirMaxBytes: 250 });
    await second.scanned;
    expect(second.stats().diskEntries).toBe(2);
    expect(await readdir(join(dir, 'ab'))).toEqual([]); // a crashed write's temp file is removed
    second.put(sha256Hex(bufs[3]!), bufs[3]!);
    await second.whenWritten();
    expect(second.stats().diskEntries).toBe(2);
    const onDisk = (await readdir(dir, { recursive: true })).filter((n) => /[0-9a-f]{64}$/.test(n));
    expect(onDisk).toHaveLength(2);
  });

  it('an unwritable --cache-dir is logged once; the cache keeps working in memory', async () => {
    const dir = await tempDir();
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 1000, dir: join(dir, 'sub'), log: (l) => logs.push(l) });
    await cache.scanned;
    // root ignores mode bits: replace the directory with a file so every write fails for everyone
    await rm(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'sub'), 'not a directory');
    for (let i = 0; i < 3; i++) {
      const b = Buffer.from(`b${i}`);
      cache.put(sha256Hex(b), b);
    }
    await cache.whenWritten();
    expect(logs.filter((l) => l.includes('cannot write to --cache-dir'))).toHaveLength(1);
    expect(cache.getMemory(sha256Hex(Buffer.from('b2')))?.toString()).toBe('b2');
    expect(await readdir(dir)).toEqual(['sub']);
  });
});

describe('GrantCache', () => {
  it('reuses a grant for the TTL measured from when it was asked; coalesces concurrent checks', async () => {
    const clock = { now: 0 };
    let calls = 0;
    let release!: () => void;
    const client = { grant: async () => { calls++; await new Promise<void>((r) => (release = r)); } };
    const grants = new GrantCache(client, 1000, () => clock.now);
    const checks = [grants.check('account'), grants.check('account')];
    clock.now = 400; // the answer arrives late: still valid only until 0 + 1000
    release();
    await Promise.all(checks);
    expect(calls).toBe(1);
    clock.now = 999;
    expect(grants.isFresh('account')).toBe(true);
    clock.now = 1000;
    expect(grants.isFresh('account')).toBe(false);
  });

  it('never caches a denial', async () => {
    let allow = false;
    const grants = new GrantCache({ grant: async () => { if (!allow) throw new KnowledgeError('not_found', 'no'); } }, 1000, () => 0);
    await expect(grants.check('team_a')).rejects.toThrow('no');
    allow = true;
    await grants.check('team_a');
    expect(grants.isFresh('team_a')).toBe(true);
  });
});

describe('errno table and FUSE adapter', () => {
  it('every error code has an errno; the ones that matter are the POSIX ones', () => {
    for (const code of ERROR_CODES) expect(ERRNO_FOR_CODE[code]).toBeGreaterThan(0);
    expect(ERRNO_FOR_CODE.not_found).toBe(E.ENOENT);
    expect(ERRNO_FOR_CODE.read_only).toBe(E.EROFS);
    expect(ERRNO_FOR_CODE.unavailable).toBe(E.EIO);
    expect(ERRNO_FOR_CODE.integrity).toBe(E.EIO);
  });

  it('unknown errors are EIO, logged once per message', () => {
    const logs: string[] = [];
    const m = new ErrnoMapper((l) => logs.push(l));
    expect(m.toErrno(new TypeError('x is undefined'))).toBe(E.EIO);
    expect(m.toErrno(new TypeError('x is undefined'))).toBe(E.EIO);
    expect(logs).toHaveLength(1);
  });

  it('every write-type operation answers -EROFS; reads answer through the core', async () => {
    const client = new FakeControlClient();
    client.put('account/a.md', 'abc');
    const tree = Tree.fromPlan(client.currentPlan(), undefined);
    const fs = new KnowledgeFilesystem({
      tree: () => tree,
      grants: new GrantCache(client, 1000),
      fetcher: new ContentFetcher({ client, cache: new ContentCache({ maxBytes: 100 }) }),
      requestTimeoutMs: 1000,
    });
    const ops = buildOps(fs, new ErrnoMapper(() => undefined));
    expect(WRITE_OPS).toEqual(expect.arrayContaining(['write', 'create', 'unlink', 'rename', 'mkdir', 'rmdir', 'symlink', 'link', 'chmod', 'chown', 'truncate', 'utimens', 'setxattr']));
    for (const name of WRITE_OPS) {
      const op = ops[name] as (...args: unknown[]) => void;
      const code = await new Promise<number>((resolve) => op('/account/a.md', 0, 0, 0, (c: number) => resolve(c)));
      expect(code, name).toBe(-E.EROFS);
    }
    const missing = await new Promise<number>((resolve) => ops.getattr('/nope', (c) => resolve(c)));
    expect(missing).toBe(-E.ENOENT);
    const fd = await new Promise<number>((resolve, reject) => ops.open('/account/a.md', 0, (c, h) => (c === 0 ? resolve(h!) : reject(c))));
    const buf = Buffer.alloc(10);
    const n = await new Promise<number>((resolve) => ops.read('/account/a.md', fd, buf, 10, 0, resolve));
    expect(buf.subarray(0, n).toString()).toBe('abc');
  });
});

describe('FUSE availability', () => {
  const ok: FuseProbe = { exists: () => true, readWritable: () => true, hasLibfuse2: () => true, findOnPath: () => '/bin/fusermount', uid: () => 1000 };

  it('names each missing piece and how to fix it', () => {
    expect(fuseProblems(ok)).toEqual([]);
    const text = describeFuseProblems(fuseProblems({ ...ok, exists: () => false, hasLibfuse2: () => false, findOnPath: () => undefined }));
    expect(text).toContain('/dev/fuse does not exist');
    expect(text).toContain('--device /dev/fuse');
    expect(text).toContain('apt-get install -y libfuse2');
    expect(text).toContain('fusermount is not on PATH');
    const perm = describeFuseProblems(fuseProblems({ ...ok, readWritable: () => false }));
    expect(perm).toContain('no read/write permission on /dev/fuse for uid 1000');
  });

  it('parses /proc/mounts, octal escapes included', () => {
    const entries = parseMounts('knowledgefs /tmp/a\\040b/knowledge fuse.knowledgefs rw 0 0\nproc /proc proc rw 0 0\n');
    expect(entries[0]).toEqual({ source: 'knowledgefs', target: '/tmp/a b/knowledge', fstype: 'fuse.knowledgefs', options: ['rw'] });
    expect(entries).toHaveLength(2);
  });
});

describe('plan path check fast path', () => {
  it('agrees with packPathProblem on arbitrary paths', async () => {
    const fc = (await import('fast-check')).default;
    const { pathOk } = await import('../src/daemon/control-plane/wire-check.js');
    const { packPathProblem } = await import('../src/core/paths.js');
    const segment = fc.oneof(
      fc.constantFrom('.', '..', '', 'a', '.hidden', 'a b', 'x'.repeat(256), 'é', 'a\\b', 'a\u0000b', '\ud800'),
      fc.string({ minLength: 0, maxLength: 12 }),
    );
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), fc.boolean(), (segs, lead) => {
        const p = (lead ? '/' : '') + segs.join('/');
        return pathOk(p) === (packPathProblem(p) === null);
      }),
      { numRuns: 2000 },
    );
  });
});
