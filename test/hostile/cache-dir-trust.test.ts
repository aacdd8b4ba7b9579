// Cache directories another local user controls, or has planted things in.
// The mount daemon (--cache-dir) and the server (--blob-cache-dir) often run
// as root, so a link they write through overwrites any file, and a FIFO they
// open for reading parks a libuv threadpool thread until a writer comes (four
// of them and every other fs call of the process waits: cold opens fail, and
// SIGTERM never finishes). So:
//   - a directory another user owns or may write is refused at start, naming
//     it and the fix (real users, test/helpers/test-users.ts);
//   - links planted at temp names (the old ones were predictable) or at final
//     names are never written through: a root-owned 0600 file stays
//     byte-identical; a planted or foreign fan-out subdirectory is not used;
//   - FIFOs planted as cache entries are misses, refetched, without blocking
//     a thread: more of them than the threadpool has threads, under a real
//     mount, and cold opens still work and SIGTERM still exits.
// Planting is done by the test itself in a directory it owns where the
// ownership check would otherwise hide the bug (planted after the check).

import { constants, closeSync, existsSync, openSync, readdirSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/core/sha256.js';
import { ContentCache } from '../../src/daemon/content/content-cache.js';
import { BlobCache } from '../../src/store/publication/blob-cache.js';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, fuseSuite, isMounted, REPO_ROOT, run, startMount, type MountHandle } from '../helpers/mount.js';
import { runAs, testUser, usersSuite, type TestUser } from '../helpers/test-users.js';

const SECRET = 'root:only-root-may-read-this\n';
const temps: string[] = [];
const fifos: string[] = [];

async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  temps.push(d);
  return d;
}

/** A root-owned (our own) 0600 file that must never change. */
async function victimFile(): Promise<string> {
  const file = join(await tempDir('kfs-victim-'), 'secret');
  await writeFile(file, SECRET, { mode: 0o600 });
  return file;
}

async function expectUntouched(file: string): Promise<void> {
  expect(await readFile(file, 'utf8')).toBe(SECRET);
  expect((await stat(file)).mode & 0o777).toBe(0o600);
}

async function mkfifo(path: string): Promise<void> {
  const r = await run('mkfifo', ['-m', '0600', path]);
  if (r.code !== 0) throw new Error(`mkfifo ${path}: ${r.stderr}`);
  fifos.push(path);
}

/**
 * Releases any reader an unfixed cache left blocked on a planted FIFO (open
 * for write and close: the reader sees EOF), a few rounds for the opens that
 * were queued behind the blocked threads, then removes the FIFOs.
 */
async function releaseFifos(): Promise<void> {
  const planted = fifos.splice(0);
  for (let round = 0; round < 5 && planted.some((p) => existsSync(p)); round++) {
    for (const path of planted) {
      try {
        closeSync(openSync(path, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // no reader waiting (ENXIO), or gone
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const path of planted) await rm(path, { force: true });
}

/** `promise`, or 'blocked' after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'blocked'> {
  return Promise.race([promise, new Promise<'blocked'>((r) => setTimeout(() => r('blocked'), ms).unref())]);
}

afterEach(releaseFifos);
afterAll(async () => {
  for (const d of temps) await rm(d, { recursive: true, force: true });
});

describe('the content cache (--cache-dir) never writes through a planted link', () => {
  it('links planted at the temp names and the final name: the target stays byte-identical, the cache file is ours', async () => {
    const target = await victimFile();
    const dir = await tempDir('kfs-cache-');
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 0, dir, log: (l) => logs.push(l) });
    await cache.scanned; // the start-up scan removes stray temp names: plant after it
    const body = Buffer.from('cached bytes\n');
    const sha = sha256Hex(body);
    const file = cache.pathFor(sha);
    await mkdir(join(dir, sha.slice(0, 2)), { mode: 0o700 });
    // Every name the old code would have used (<sha>.<pid>-<n>.tmp), and the final name.
    for (let n = 1; n <= 20; n++) await symlink(target, `${file}.${process.pid}-${n}.tmp`);
    await symlink(target, file);
    cache.put(sha, body);
    await cache.whenWritten();
    await expectUntouched(target);
    const st = await lstat(file);
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).toBe('cached bytes\n');
    expect((await cache.get(sha))?.toString()).toBe('cached bytes\n');
    expect(logs.filter((l) => l.includes('cannot write'))).toEqual([]);
  });

  it('a fan-out subdirectory that is a link to another directory is not used', async () => {
    const elsewhere = await tempDir('kfs-elsewhere-');
    const dir = await tempDir('kfs-cache-');
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 1000, dir, log: (l) => logs.push(l) });
    await cache.scanned;
    const body = Buffer.from('redirected?\n');
    const sha = sha256Hex(body);
    await symlink(elsewhere, join(dir, sha.slice(0, 2)));
    cache.put(sha, body);
    await cache.whenWritten();
    expect(await readdir(elsewhere)).toEqual([]);
    expect(logs.join('\n')).toContain(`not using ${join(dir, sha.slice(0, 2))}`);
    expect(cache.getMemory(sha)?.toString()).toBe('redirected?\n'); // still cached in memory
  });

  it('a cache entry that is a link is a miss: removed, never followed, logged', async () => {
    const target = await victimFile();
    const dir = await tempDir('kfs-cache-');
    const body = Buffer.from(SECRET); // even with the right bytes behind it
    const sha = sha256Hex(body);
    await mkdir(join(dir, sha.slice(0, 2)), { mode: 0o700 });
    await symlink(target, join(dir, sha.slice(0, 2), sha));
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 0, dir, log: (l) => logs.push(l) });
    expect(await cache.get(sha)).toBeUndefined();
    expect(existsSync(join(dir, sha.slice(0, 2), sha))).toBe(false);
    expect(logs.join('\n')).toMatch(/is a symbolic link, not a file of this daemon's/);
    await expectUntouched(target);
  });

  it('FIFOs planted as cache entries (more than the threadpool has threads): misses at once, removed', async () => {
    const dir = await tempDir('kfs-cache-');
    const bodies = Array.from({ length: 8 }, (_, i) => Buffer.from(`fifo victim ${i}\n`));
    for (const b of bodies) {
      const sha = sha256Hex(b);
      await mkdir(join(dir, sha.slice(0, 2)), { recursive: true, mode: 0o700 });
      await mkfifo(join(dir, sha.slice(0, 2), sha));
    }
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 0, dir, log: (l) => logs.push(l) });
    const got = await within(Promise.all(bodies.map((b) => cache.get(sha256Hex(b)))), 3_000);
    expect(got).toEqual(bodies.map(() => undefined));
    expect(logs.filter((l) => /is a FIFO, not a file of this daemon's/.test(l))).toHaveLength(bodies.length);
    for (const b of bodies) expect(existsSync(cache.pathFor(sha256Hex(b)))).toBe(false);
  });
});

describe('the blob cache (--blob-cache-dir) never writes through a planted link, never blocks on a FIFO', () => {
  const blob = (n: number) => Buffer.alloc(1000, n);

  function blobCache(diskDir: string, logs: string[]) {
    const source = new Map<string, Buffer>();
    const fetched: string[] = [];
    const c = new BlobCache({
      memoryBytes: 1_500,
      diskDir,
      log: (l) => logs.push(l),
      fetch: async (sha) => {
        fetched.push(sha);
        return source.get(sha) as Buffer;
      },
      corrupt: (sha, actual, from) => new Error(`${sha} corrupt from ${from}: ${actual}`),
    });
    return { c, source, fetched };
  }

  const settle = async (dir: string, name: string) => {
    for (let i = 0; i < 200 && !existsSync(join(dir, name)); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('links planted at the temp name and the final name: the target stays byte-identical', async () => {
    const target = await victimFile();
    const dir = await tempDir('kfs-blobs-');
    const logs: string[] = [];
    const { c, source } = blobCache(dir, logs);
    const [a, b] = [blob(1), blob(2)];
    source.set(sha256Hex(a), a);
    source.set(sha256Hex(b), b);
    // The old temp name was .<sha>.<pid>.tmp.
    await symlink(target, join(dir, `.${sha256Hex(a)}.${process.pid}.tmp`));
    await c.get(sha256Hex(a), 1000);
    await c.get(sha256Hex(b), 1000); // a is evicted to disk
    await settle(dir, sha256Hex(a)); // the final name appears once the spill has been written and renamed
    await expectUntouched(target);
    const st = await lstat(join(dir, sha256Hex(a)));
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect((await readFile(join(dir, sha256Hex(a)))).equals(a)).toBe(true);
  });

  it('FIFOs and links left in the directory are not adopted: the blobs are fetched, nothing blocks', async () => {
    const target = await victimFile();
    const dir = await tempDir('kfs-blobs-');
    const blobs = Array.from({ length: 8 }, (_, i) => blob(10 + i));
    for (const b of blobs) await mkfifo(join(dir, sha256Hex(b)));
    const linked = blob(40);
    await symlink(target, join(dir, sha256Hex(linked)));
    const logs: string[] = [];
    const { c, source, fetched } = blobCache(dir, logs);
    for (const b of [...blobs, linked]) source.set(sha256Hex(b), b);
    const got = await within(Promise.all([...blobs, linked].map((b) => c.get(sha256Hex(b), 1000))), 3_000);
    expect(got).not.toBe('blocked');
    expect(fetched).toHaveLength(blobs.length + 1);
    await expectUntouched(target);
  });
});

usersSuite('cache directories another local user controls', () => {
  let base: string;
  let shared: string; // a /tmp lookalike: root-owned, 1777
  let attacker: TestUser;

  beforeAll(async () => {
    if (!existsSync(join(REPO_ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
    attacker = testUser('kfs-test-attacker');
    base = await tempDir('kfs-cachetrust-');
    await chmod(base, 0o755);
    shared = join(base, 'shared');
    await mkdir(shared);
    await chmod(shared, 0o1777);
    await writeFile(join(base, 'token'), 'kfsr_0123456789abcdef0123\n', { mode: 0o600 });
  });

  /** `mount --cache-dir dir` and `serve --blob-cache-dir dir` against nothing: the check must come first. */
  async function startBoth(dir: string) {
    const mount = await run(process.execPath, [BIN, 'mount', join(base, 'mnt'), '--server', 'http://127.0.0.1:1', '--token-file', join(base, 'token'),
      '--socket', join(base, 'control.sock'), '--cache-dir', dir], { timeoutMs: 30_000 });
    const serve = await run(process.execPath, [BIN, 'serve', '--listen', '127.0.0.1:0', '--store', 's3://bucket/prefix', '--s3-endpoint', 'http://127.0.0.1:1',
      '--blob-cache-dir', dir, '--state', join(base, 'state.json'), '--audit-log', join(base, 'audit.log')], {
      timeoutMs: 30_000,
      env: { KNOWLEDGEFS_ADMIN_TOKEN: 'kfsadmin_0123456789abcdef', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y', AWS_REGION: 'us-east-1' },
    });
    return { mount, serve };
  }

  it('mount --cache-dir and serve --blob-cache-dir refuse a directory another user owns, or others may write, naming it and the fix', async () => {
    const owned = join(shared, 'planted-by-attacker');
    expect((await runAs(attacker, 'mkdir', ['-m', '0700', owned])).code).toBe(0);
    const open = join(shared, 'world-writable');
    await mkdir(open);
    await chmod(open, 0o777);
    for (const [dir, why] of [[owned, `owned by uid ${attacker.uid}`], [open, 'is writable by other users (mode 0777)']] as const) {
      const { mount, serve } = await startBoth(dir);
      expect(mount.code, mount.stderr).toBe(2);
      expect(mount.stderr).toContain(`refusing the cache directory (--cache-dir) ${dir}: `);
      expect(mount.stderr).toContain(why);
      expect(mount.stderr).toContain('or choose a --cache-dir only you (or root) can write');
      expect(serve.code, serve.stderr).toBe(2);
      expect(serve.stderr).toContain(`refusing the blob cache directory (--blob-cache-dir) ${dir}: `);
      expect(serve.stderr).toContain(why);
      expect(serve.stderr).toContain('or choose a --blob-cache-dir only you (or root) can write');
    }
    expect(readdirSync(owned)).toEqual([]);
    expect(readdirSync(open)).toEqual([]);
  });

  it('a missing cache directory is created 0700; a directory only root can write is accepted', async () => {
    const fresh = join(base, 'fresh', 'cache');
    const { mount } = await startBoth(fresh);
    expect(mount.stderr).not.toContain('refusing');
    expect(mount.code).toBe(4); // got as far as the (absent) control plane
    expect((await stat(fresh)).mode & 0o7777).toBe(0o700);
  });

  it('a fan-out subdirectory another user owns is not used, and their link in it is not written through', async () => {
    const target = await victimFile();
    const dir = await tempDir('kfs-cache-');
    await chmod(dir, 0o711); // the attacker may pass through to their subdirectory, not write here
    const logs: string[] = [];
    const cache = new ContentCache({ maxBytes: 1000, dir, log: (l) => logs.push(l) });
    await cache.scanned;
    const body = Buffer.from('to be cached\n');
    const sha = sha256Hex(body);
    const sub = join(dir, sha.slice(0, 2));
    // Left by an earlier owner of the directory (the operator chowned only the top).
    await mkdir(sub, { mode: 0o700 });
    await chown(sub, attacker.uid, attacker.gid);
    for (let n = 1; n <= 5; n++) expect((await runAs(attacker, 'ln', ['-s', target, `${join(sub, sha)}.${process.pid}-${n}.tmp`])).code).toBe(0);
    expect((await runAs(attacker, 'ln', ['-s', target, join(sub, sha)])).code).toBe(0);
    cache.put(sha, body);
    await cache.whenWritten();
    await expectUntouched(target);
    expect(logs.join('\n')).toContain(`not using ${sub}: ${sub} is owned by uid ${attacker.uid}`);
    expect(await cache.get(sha)).toEqual(body); // from memory; the disk copy is never read from there
  });
});

fuseSuite('FIFOs planted in --cache-dir under a real mount', () => {
  // One file per directory: directory read-ahead would otherwise fetch (and replace) a FIFO's file before its own open reads the cache.
  const files = Array.from({ length: 12 }, (_, i) => ({ path: `account/d${i}/f.md`, content: `file ${i}\n${'x'.repeat(i * 100)}\n` }));
  let data: string;
  let cp: TestControlPlane;
  let token: string;
  let mount: MountHandle | undefined;

  beforeAll(async () => {
    data = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: Object.fromEntries(files.map((f) => [f.path, f.content])) });
    cp = await startControlPlane({ dataDir: data });
    token = (await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' })).token;
  });
  afterAll(async () => {
    await releaseFifos();
    await mount?.stop();
    await cp?.close();
    if (data) await removeDataDir(data);
  });

  it('opens of planted FIFOs are served (fetched anew), nothing blocks: cold opens still work, SIGTERM exits', async () => {
    const cacheDir = join(await tempDir('kfs-fifo-cache-'), 'cache');
    await mkdir(cacheDir, { mode: 0o700 });
    const planted = files.slice(0, 8); // more than libuv's 4 threadpool threads
    for (const f of planted) {
      const sha = sha256Hex(Buffer.from(f.content));
      await mkdir(join(cacheDir, sha.slice(0, 2)), { recursive: true, mode: 0o700 });
      await mkfifo(join(cacheDir, sha.slice(0, 2), sha));
    }
    mount = await startMount({ serverUrl: cp.url, token, args: ['--cache-dir', cacheDir, '--prefetch-content', 'off', '--request-timeout', '5s'] });
    const m = mount;
    const cat = (f: { path: string }) => run('cat', [join(m.mountpoint, f.path)], { timeoutMs: 20_000 });
    const first = await Promise.all(planted.map(cat));
    for (const [i, r] of first.entries()) expect(r.stdout, `${planted[i]?.path}: ${r.stderr}`).toBe(planted[i]?.content);
    expect(m.stderr.split('\n').filter((l) => /is a FIFO, not a file of this daemon's; removed, refetching/.test(l))).toHaveLength(planted.length);
    // Files nobody opened yet: cold opens, through the same (unblocked) threadpool.
    const cold = files.slice(8);
    const second = await Promise.all(cold.map(cat));
    for (const [i, r] of second.entries()) expect(r.stdout, `${cold[i]?.path}: ${r.stderr}`).toBe(cold[i]?.content);
    // The refetched files are now real cache files of ours.
    for (const f of planted) expect((await lstat(join(cacheDir, sha256Hex(Buffer.from(f.content)).slice(0, 2), sha256Hex(Buffer.from(f.content))))).isFile()).toBe(true);
    expect((await run('mountpoint', ['-q', m.mountpoint], { timeoutMs: 10_000 })).code).toBe(0);
    const exited = await within(m.kill('SIGTERM'), 8_000);
    expect(exited, m.stderr).not.toBe('blocked');
    expect(isMounted(m.mountpoint)).toBe(false);
  }, 120_000);
});
