// The disk cache failing under a real mount:
//   - --cache-dir on a 1 MiB tmpfs with ~3 MiB of content: the disk fills
//     up during prefetch; the daemon says so once and keeps serving exact
//     bytes (from memory or the network);
//   - cache files corrupted on disk (a flipped byte, truncation, another
//     file's bytes, an empty file): detected by hash when read back, deleted
//     and refetched — the reader gets exact bytes — both in a running daemon
//     and in a new daemon reusing the cache dir after a restart.
// The memory cache is far smaller than any file, so reads really go through
// the disk copy.

import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { fuseSuite, isMounted, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { checkGrepOutput, filesSpec, makeCorpus, sha256, versionsOf, type CorpusFile } from './corpus.js';

const MOUNT_ARGS = ['--cache-size', '16KiB', '--grant-ttl', '5s', '--sync-interval', '500ms', '--request-timeout', '5s'];

fuseSuite('disk cache faults', () => {
  let dir: string;
  let base: string;
  let cacheDir: string;
  let cp: TestControlPlane;
  let token: string;
  let corpus: CorpusFile[];
  let mount: MountHandle | undefined;

  beforeAll(async () => {
    // ~3.5 MiB: 2 scopes × 20 files of up to ~3000 lines (up to ~200 KiB each).
    corpus = makeCorpus(['account', 'team_payments'], 20, 3000);
    dir = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: filesSpec(corpus) });
    base = await mkdtemp(join(tmpdir(), 'kfs-cachefault-'));
    cacheDir = join(base, 'cache');
    await mkdir(cacheDir);
    const tmpfs = await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', cacheDir]);
    if (tmpfs.code !== 0) throw new Error(`cannot mount a 1 MiB tmpfs for the cache dir (needs root): ${tmpfs.stderr}`);
    cp = await startControlPlane({ dataDir: dir });
    token = (await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' })).token;
  });

  afterAll(async () => {
    await mount?.stop();
    await cp?.close();
    if (cacheDir && isMounted(cacheDir)) await run('umount', ['-l', cacheDir]);
    if (base) await rm(base, { recursive: true, force: true });
    if (dir) await removeDataDir(dir);
  });

  const total = () => corpus.reduce((n, f) => n + Buffer.byteLength(f.content), 0);

  async function cacheFiles(): Promise<string[]> {
    const out: string[] = [];
    for (const sub of await readdir(cacheDir).catch(() => [] as string[])) {
      for (const name of await readdir(join(cacheDir, sub)).catch(() => [] as string[])) {
        if (/^[0-9a-f]{64}$/.test(name)) out.push(join(cacheDir, sub, name));
      }
    }
    return out;
  }

  async function grepAllExact(m: MountHandle): Promise<void> {
    const r = await run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
    expect(r.stderr).toBe('');
    const check = checkGrepOutput(r.stdout, versionsOf(corpus));
    expect(check.problems).toEqual([]);
    expect(check.complete.length).toBe(corpus.length);
  }

  it('a full cache disk: logged once, every byte still exact', async () => {
    expect(total()).toBeGreaterThan(2 * 1024 * 1024);
    mount = await startMount({ serverUrl: cp.url, token, args: ['--cache-dir', cacheDir, ...MOUNT_ARGS] });
    const m = mount;
    const done = await waitFor(() => /prefetch: .*done/.test(m.stderr), 60_000);
    expect(done, m.stderr).toBe(true);
    // Disk writes trail the memory cache (write-through in the background),
    // so the full-disk line may come a moment after prefetch says done.
    expect(await waitFor(() => m.stderr.includes('cannot write to --cache-dir'), 30_000), m.stderr).toBe(true);
    const full = m.stderr.split('\n').filter((l) => l.includes('cannot write to --cache-dir'));
    expect(full.length, m.stderr).toBe(1);
    expect(full[0]).toMatch(/ENOSPC|no space/i);
    await grepAllExact(m);
    // What did land on disk is intact.
    for (const file of await cacheFiles()) expect(sha256(await readFile(file))).toBe(file.split('/').pop());
    expect(m.child.exitCode).toBeNull();
  }, 120_000);

  it('corrupt cache files in a running daemon: detected by hash, refetched, exact bytes', async () => {
    const m = mount as MountHandle;
    const files = await cacheFiles();
    // Only files too big for the 16 KiB memory cache are read back from disk on every open.
    const big: string[] = [];
    for (const file of files) if ((await stat(file)).size > 32 * 1024) big.push(file);
    expect(big.length, 'too few large files were cached on disk').toBeGreaterThanOrEqual(4);
    const bySha = new Map(corpus.map((f) => [sha256(f.content), f]));
    const victims = big.slice(0, 4);
    await corrupt(victims, big[big.length - 1] as string);
    for (const file of victims) {
      const f = bySha.get(file.split('/').pop() as string) as CorpusFile;
      expect(f, 'a cache file named after no corpus file').toBeDefined();
      // The kernel may still hold the file's pages from earlier reads (and the
      // native binding answers a warm open without the daemon): drop them, so
      // the cat's reads reach the daemon and its disk cache.
      expect((await run('dd', [`if=${join(m.mountpoint, f.mountPath)}`, 'iflag=nocache', 'count=0'])).code).toBe(0);
      const r = await run('cat', [join(m.mountpoint, f.mountPath)], { timeoutMs: 60_000 });
      expect(r.stdout === f.content, `${f.mountPath}: wrong bytes after corruption (${r.stderr})`).toBe(true);
    }
    const detected = m.stderr.split('\n').filter((l) => l.includes('does not match its sha256'));
    expect(detected.length).toBeGreaterThanOrEqual(victims.length);
    await grepAllExact(m);
  }, 120_000);

  it('corrupt cache files between two daemons: the new daemon verifies and refetches', async () => {
    await mount?.stop();
    mount = undefined;
    const files = await cacheFiles();
    expect(files.length).toBeGreaterThanOrEqual(4);
    await corrupt(files, files[0] as string);
    mount = await startMount({ serverUrl: cp.url, token, args: ['--cache-dir', cacheDir, '--prefetch-content', 'off', ...MOUNT_ARGS] });
    await grepAllExact(mount);
    const detected = mount.stderr.split('\n').filter((l) => l.includes('does not match its sha256'));
    expect(detected.length).toBeGreaterThanOrEqual(files.length - 1); // files[0] may have been given its own bytes
    for (const file of await cacheFiles()) {
      const s = await stat(file);
      if (s.size > 0) expect(sha256(await readFile(file))).toBe(file.split('/').pop());
    }
  }, 120_000);
});

/**
 * Four kinds of damage, round robin: flipped byte, truncation, another file's
 * bytes, empty. The cache disk is full by now (the first test fills it), so
 * damage is done in place and never grows a file: a rewrite that first frees
 * a file's pages could lose them to the daemon's own writes and fail ENOSPC.
 */
async function corrupt(files: readonly string[], other: string): Promise<void> {
  const otherBytes = await readFile(other);
  for (const [i, file] of files.entries()) {
    const size = (await stat(file)).size;
    switch (i % 4) {
      case 0: {
        const middle = Math.floor(size / 2);
        const byte = (await readFile(file))[middle] ?? 0;
        await overwrite(file, Buffer.from([byte ^ 0x01]), middle);
        break;
      }
      case 1:
        await truncate(file, Math.floor(size / 3));
        break;
      case 2: {
        // Another file's bytes, cut to fit; a file is never its own "other".
        const replacement = (file === other ? Buffer.from('another file') : otherBytes).subarray(0, size);
        await overwrite(file, replacement, 0);
        await truncate(file, replacement.length);
        break;
      }
      default:
        await truncate(file, 0);
    }
  }
}

/** Writes `bytes` over `file` at `position` without truncating it first. */
async function overwrite(file: string, bytes: Buffer, position: number): Promise<void> {
  const handle = await open(file, 'r+');
  try {
    await handle.write(bytes, 0, bytes.length, position);
  } finally {
    await handle.close();
  }
}
