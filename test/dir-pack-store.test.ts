// The embedded pack store on a real directory, in this process: which packs a
// scan finds, what it skips (each with one log line for the life of the
// store), what a rescan reuses, what a scan of some directories leaves alone,
// and what a read answers when the file changed, grew or was swapped for a
// link since the scan.

import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { appendFile, link, mkdir, mkdtemp, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ScopeName } from '../src/core/scope.js';
import { hashFile, insidePack, PackEntries } from '../src/store/data-dir/dir-pack-entries.js';
import { MAX_LOGGED, SYNC_HASH_BYTES } from '../src/store/data-dir/dir-pack-index.js';
import { DirPackStore, type ScanObserver } from '../src/store/data-dir/dir-pack-store.js';

const sha = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

let root: string;
let log: string[];
const servers: Server[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'kfs-dirpack-'));
  log = [];
});
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  await rm(root, { recursive: true, force: true });
});

/** Writes `files` (paths relative to the data dir), creating directories. */
async function put(files: Record<string, string | Buffer>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(root, path, '..'), { recursive: true });
    await writeFile(join(root, path), content);
  }
}

function storeOf(options: { maxFileSize?: number; observer?: ScanObserver } = {}): DirPackStore {
  return new DirPackStore(root, { maxFileSize: options.maxFileSize ?? 1024 * 1024, log: (line) => log.push(line), ...(options.observer ? { observer: options.observer } : {}) });
}

const paths = (store: DirPackStore, scope: ScopeName) => store.snapshot(scope)?.files.map((f) => f.path);

/**
 * Runs `check` with a file in `dataRoot`'s account pack whose directory is
 * listed at ~3950 bytes and whose own name is 250 bytes: past PATH_MAX as a
 * whole. It cannot be created there by path, so it is created short and its
 * directory moved down; and moved back after (rm cannot reach it either).
 */
async function withDeepFile(dataRoot: string, check: (file: string) => Promise<void>): Promise<void> {
  const name = `${'n'.repeat(247)}.md`;
  await put({ [`staging/${name}`]: 'deep' });
  const levels: string[] = [];
  while (join(dataRoot, 'account', ...levels).length < 3700) levels.push('d'.repeat(250));
  levels.push('p'.repeat(3950 - join(dataRoot, 'account', ...levels).length - 1));
  mkdirSync(join(dataRoot, 'account', ...levels), { recursive: true });
  const deep = join(dataRoot, 'account', ...levels, 'last');
  await rename(join(root, 'staging'), deep);
  try {
    await check(join(deep, name));
  } finally {
    await rename(deep, join(root, 'staging'));
  }
}

/** How many descriptors this process holds open. */
function openDescriptors(): number {
  return readdirSync('/proc/self/fd').length;
}

/** A unix socket at `path`: a directory entry that is neither a file, a directory nor a link. */
async function socketAt(path: string): Promise<void> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(path, resolve));
}

describe('scan', () => {
  it('the account and each valid team directory are packs, account first; each file with its size, mtime and sha256', async () => {
    await put({ 'teams/search/a.md': 'search\n', 'account/DUTY.md': '# Account\n', 'teams/payments/runbooks/db.md': 'db\n', 'teams/payments/DUTY.md': 'pay\n' });
    await utimes(join(root, 'account/DUTY.md'), 1000, 1_700_000_000.5);
    const store = storeOf();
    expect(store.scopes()).toEqual([]);
    expect(await store.scan()).toBe(true);
    expect(store.scopes().map((s) => s.scope)).toEqual(['account', 'team_payments', 'team_search']);
    expect(store.snapshot('account')?.files).toEqual([{ path: 'DUTY.md', size: 10, mtimeMs: 1_700_000_000_500, sha256: sha('# Account\n') }]);
    expect(paths(store, 'team_payments')).toEqual(['DUTY.md', 'runbooks/db.md']);
    expect(store.snapshot('team_payments')?.totalBytes).toBe(7);
    expect(store.snapshot('team_nope')).toBeUndefined();
    expect(log).toEqual([]);
  });

  it('packs are listed account first, then teams by id, whatever order the directory lists them in', async () => {
    for (const team of ['zeta', 'alpha', 'mid', 'beta']) await put({ [`teams/${team}/a.md`]: team });
    await put({ 'account/a.md': 'a' });
    const store = storeOf();
    await store.scan();
    expect(store.scopes().map((s) => s.scope)).toEqual(['account', 'team_alpha', 'team_beta', 'team_mid', 'team_zeta']);
  });

  it('an unchanged tree: no change, the same snapshot objects, the same generation', async () => {
    await put({ 'account/a.md': 'a', 'teams/payments/b.md': 'b' });
    const store = storeOf();
    await store.scan();
    const before = store.scopes();
    const generation = store.generation;
    expect(generation).toBe(1);
    expect(await store.scan()).toBe(false);
    expect(store.scopes()).toBe(before);
    expect(store.generation).toBe(generation);
  });

  it('an edit, a new file, a removed file and a removed pack each count as a change', async () => {
    await put({ 'account/a.md': 'a', 'teams/payments/b.md': 'b', 'teams/search/c.md': 'c' });
    const store = storeOf();
    await store.scan();
    const account = store.snapshot('account');
    await appendFile(join(root, 'teams/payments/b.md'), 'b');
    expect(await store.scan()).toBe(true);
    expect(store.snapshot('team_payments')?.files[0]).toMatchObject({ size: 2, sha256: sha('bb') });
    expect(store.snapshot('account')).toBe(account); // an unchanged pack keeps its snapshot
    await put({ 'teams/payments/new.md': 'n' });
    expect(await store.scan()).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['b.md', 'new.md']);
    await rm(join(root, 'teams/payments/b.md'));
    expect(await store.scan()).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['new.md']);
    await rm(join(root, 'teams/search'), { recursive: true });
    expect(await store.scan()).toBe(true);
    expect(store.scopes().map((s) => s.scope)).toEqual(['account', 'team_payments']);
    expect(store.generation).toBe(5);
  });

  it('a file replaced by the same bytes is hashed again (another inode): a new snapshot of the same version', async () => {
    await put({ 'account/a.md': 'same', 'account/b.md': 'b' });
    const store = storeOf();
    await store.scan();
    const before = store.snapshot('account');
    await rename(join(root, 'account/a.md'), join(root, 'account/old'));
    await put({ 'account/a.md': 'same' });
    await rm(join(root, 'account/old'));
    expect(await store.scan()).toBe(true);
    expect(store.snapshot('account')).not.toBe(before);
    expect(store.snapshot('account')?.version).toBe(before?.version);
  });

  it('a file whose bytes changed in place with size and mtime kept is found by its ctime', async () => {
    await put({ 'account/a.md': 'one' });
    const store = storeOf();
    await store.scan();
    await new Promise((r) => setTimeout(r, 20));
    await writeFile(join(root, 'account/a.md'), 'two');
    await utimes(join(root, 'account/a.md'), 0, (store.snapshot('account')?.files[0]?.mtimeMs ?? 0) / 1000);
    expect(await store.scan()).toBe(true);
    expect(store.snapshot('account')?.files[0]?.sha256).toBe(sha('two'));
  });

  it('no data dir layout at all: no packs, no log', async () => {
    const store = storeOf();
    expect(await store.scan()).toBe(false);
    expect(store.scopes()).toEqual([]);
    expect(log).toEqual([]);
  });

  it('concurrent full scans share one; scans of some directories queue behind it', async () => {
    await put({ 'account/a.md': 'a' });
    const store = storeOf();
    const first = store.scan();
    expect(store.scan()).toBe(first);
    const some = store.scan(new Map([['account', new Set([''])]]));
    expect(some).not.toBe(first);
    expect(await first).toBe(true);
    expect(await some).toBe(false);
    expect(store.scan()).not.toBe(first); // the shared one ended
  });

  it('a scan that throws rejects, and the next scan runs', async () => {
    const store = new DirPackStore(join(root, 'missing'), { maxFileSize: 1024, log: (line) => log.push(line) });
    await expect(store.scan()).rejects.toThrow(/ENOENT/);
    await mkdir(join(root, 'missing/account'), { recursive: true });
    await writeFile(join(root, 'missing/account/a.md'), 'a');
    expect(await store.scan()).toBe(true);
  });
});

describe('what a scan skips', () => {
  it('the layout: account/ and teams/ that are not directories, team names that are not ids, links and files among the teams', async () => {
    await put({ account: 'not a dir', 'teams/Payments/a.md': 'x', 'teams/notes.txt': 'x', 'teams/plainfile': 'x', 'teams/ok/a.md': 'a' });
    await mkdir(join(root, 'elsewhere'));
    await symlink(join(root, 'elsewhere'), join(root, 'teams/linked'));
    const store = storeOf();
    await store.scan();
    expect(store.scopes().map((s) => s.scope)).toEqual(['team_ok']);
    expect(log.sort()).toEqual(
      [
        `skipping ${root}/account: not a directory (symlinks are not followed)`,
        `skipping ${root}/teams/Payments: not a valid team id (expected [a-z0-9][a-z0-9_-]{0,62})`,
        `skipping ${root}/teams/notes.txt: not a team directory`,
        `skipping ${root}/teams/plainfile: not a directory`,
        `skipping ${root}/teams/linked: symlink (not followed)`,
      ].sort(),
    );
  });

  it('a team directory whose name is not UTF-8 is skipped, the others kept', async () => {
    await put({ 'teams/ok/a.md': 'a' });
    mkdirSync(Buffer.concat([Buffer.from(`${root}/teams/`), Buffer.from([0x74, 0xff])]));
    const store = storeOf();
    await store.scan();
    expect(store.scopes().map((s) => s.scope)).toEqual(['team_ok']);
    expect(log).toEqual([`skipping ${root}/teams/t\u00ff: name is not valid UTF-8`]);
  });

  it('teams/ as a link or a file: no team packs', async () => {
    await put({ 'account/a.md': 'a', 'real/payments/a.md': 'a' });
    await symlink(join(root, 'real'), join(root, 'teams'));
    const store = storeOf();
    await store.scan();
    expect(store.scopes().map((s) => s.scope)).toEqual(['account']);
    expect(log).toEqual([`skipping ${root}/teams: symlink (not followed): no team packs are served`]);
    await rm(join(root, 'teams'));
    await put({ teams: 'a file' });
    await store.scan();
    expect(log[1]).toBe(`skipping ${root}/teams: not a directory: no team packs are served`);
  });

  it('inside a pack: links, sockets, bad names, non-UTF-8 names, files over the limit; a hard link is served and said once', async () => {
    await put({ 'account/ok.md': 'ok', 'account/big.md': 'x'.repeat(101), 'account/back\\slash.md': 'x', 'account/sub/deep.md': 'deep' });
    await symlink(join(root, 'account/ok.md'), join(root, 'account/link.md'));
    await symlink(tmpdir(), join(root, 'account/dirlink'));
    await socketAt(join(root, 'account/sock'));
    writeFileSync(Buffer.concat([Buffer.from(`${root}/account/`), Buffer.from([0x66, 0xff, 0x2e, 0x6d, 0x64])]), 'latin1');
    await link(join(root, 'account/ok.md'), join(root, 'account/twin.md'));
    await put({ 'account/limit.md': 'x'.repeat(100) });
    const store = storeOf({ maxFileSize: 100 });
    await store.scan();
    expect(paths(store, 'account')).toEqual(['limit.md', 'ok.md', 'sub/deep.md', 'twin.md']);
    expect((await store.read('account', 'limit.md'))?.size).toBe(100);
    expect(store.readSmallSync('account', 'limit.md')?.size).toBe(100);
    const skipped = [
      `skipping ${root}/account/big.md: larger than --max-file-size (101 > 100 bytes)`,
      `skipping ${root}/account/back\\\\slash.md: backslash in name`,
      `skipping ${root}/account/link.md: symlink (not followed)`,
      `skipping ${root}/account/dirlink: symlink (not followed)`,
      `skipping ${root}/account/sock: not a regular file`,
      `skipping ${root}/account/f\u00ff.md: name is not valid UTF-8`, // named in latin1,
    ];
    const hardLinks = [`serving ${root}/account/ok.md: a hard link (2 names share its content, possibly outside the pack)`, `serving ${root}/account/twin.md: a hard link (2 names share its content, possibly outside the pack)`];
    expect(log.sort()).toEqual([...skipped, ...hardLinks].sort());
    // Once for the life of the store, across rescans and changes elsewhere.
    await put({ 'account/new.md': 'n' });
    expect(await store.scan()).toBe(true);
    expect(log.length).toBe(skipped.length + hardLinks.length);
  });

  it('a path too long for a pack is skipped, its siblings kept', async () => {
    await put({ 'account/short.md': 's' });
    await withDeepFile(root, async (file) => {
      const store = storeOf();
      await store.scan();
      expect(paths(store, 'account')).toEqual(['short.md']);
      expect(log).toEqual([`skipping ${file}: path longer than 4096 bytes`]);
    });
  });

  it('an entry the system cannot stat (its whole path past PATH_MAX) is skipped with the reason, the pack kept', async () => {
    // The data dir itself sits deep, so the pack path stays valid while the absolute one is too long.
    const deepRoot = join(root, ...Array.from({ length: 5 }, () => 'r'.repeat(250)));
    mkdirSync(join(deepRoot, 'account'), { recursive: true });
    writeFileSync(join(deepRoot, 'account', 'short.md'), 's');
    await withDeepFile(deepRoot, async (file) => {
      const store = new DirPackStore(deepRoot, { maxFileSize: 1024, log: (line) => log.push(line) });
      await store.scan();
      expect(paths(store, 'account')).toEqual(['short.md']);
      expect(log).toEqual([`skipping ${file}: cannot be read (ENAMETOOLONG)`]);
    });
  });
});

describe('scans of some directories', () => {
  async function scanned(): Promise<DirPackStore> {
    await put({ 'account/a.md': 'a', 'teams/payments/DUTY.md': 'd', 'teams/payments/runbooks/db.md': 'db', 'teams/payments/notes/n.md': 'n', 'teams/search/s.md': 's' });
    const store = storeOf();
    await store.scan();
    return store;
  }

  it('rescan the named directories with everything below; files elsewhere and other packs stay as they were', async () => {
    const store = await scanned();
    const search = store.snapshot('team_search');
    await put({ 'teams/payments/runbooks/new.md': 'new', 'teams/payments/runbooks/x/y.md': 'y', 'teams/payments/notes/unseen.md': 'u', 'teams/search/unseen.md': 'u' });
    await rm(join(root, 'teams/payments/DUTY.md'));
    expect(await store.scan(new Map([['team_payments', new Set(['runbooks'])]]))).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['DUTY.md', 'notes/n.md', 'runbooks/db.md', 'runbooks/new.md', 'runbooks/x/y.md']);
    expect(store.snapshot('team_search')).toBe(search);
    // A full scan sees the rest.
    expect(await store.scan()).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['notes/n.md', 'notes/unseen.md', 'runbooks/db.md', 'runbooks/new.md', 'runbooks/x/y.md']);
    expect(paths(store, 'team_search')).toEqual(['s.md', 'unseen.md']);
  });

  it('a file removed from a rescanned directory leaves; nothing changed is no change', async () => {
    const store = await scanned();
    expect(await store.scan(new Map([['team_payments', new Set(['runbooks', 'notes'])]]))).toBe(false);
    await rm(join(root, 'teams/payments/runbooks/db.md'));
    expect(await store.scan(new Map([['team_payments', new Set(['runbooks'])]]))).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['DUTY.md', 'notes/n.md']);
  });

  it('a named directory that is gone: what was below it leaves', async () => {
    const store = await scanned();
    await rm(join(root, 'teams/payments/notes'), { recursive: true });
    expect(await store.scan(new Map([['team_payments', new Set(['notes'])]]))).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['DUTY.md', 'runbooks/db.md']);
    expect(log).toEqual([]);
  });

  it('a pack that appeared is scanned whole even when the scan names other packs only', async () => {
    const store = await scanned();
    await put({ 'teams/ops/o.md': 'o', 'teams/ops/sub/p.md': 'p' });
    expect(await store.scan(new Map([['team_search', new Set([''])]]))).toBe(true);
    expect(paths(store, 'team_ops')).toEqual(['o.md', 'sub/p.md']);
    expect(store.scopes().map((s) => s.scope)).toEqual(['account', 'team_ops', 'team_payments', 'team_search']);
  });

  it("'' rescans the whole pack; a new pack is scanned whole; a pack named that is gone is dropped", async () => {
    const store = await scanned();
    await put({ 'teams/payments/top.md': 't', 'teams/ops/o.md': 'o', 'teams/ops/sub/p.md': 'p' });
    await rm(join(root, 'teams/search'), { recursive: true });
    expect(await store.scan(new Map([['team_payments', new Set([''])], ['team_ops', new Set(['sub'])], ['team_search', new Set([''])]]))).toBe(true);
    expect(paths(store, 'team_payments')).toContain('top.md');
    expect(paths(store, 'team_ops')).toEqual(['o.md', 'sub/p.md']);
    expect(store.snapshot('team_search')).toBeUndefined();
  });

  it('a named directory reached through a link: the whole pack is walked, never the link', async () => {
    const store = await scanned();
    await mkdir(join(root, 'outside'));
    await writeFile(join(root, 'outside/secret.md'), 'secret');
    await rm(join(root, 'teams/payments/notes'), { recursive: true });
    await symlink(join(root, 'outside'), join(root, 'teams/payments/notes'));
    await put({ 'teams/payments/top.md': 't' });
    expect(await store.scan(new Map([['team_payments', new Set(['notes'])]]))).toBe(true);
    expect(paths(store, 'team_payments')).toEqual(['DUTY.md', 'runbooks/db.md', 'top.md']);
    expect(log).toEqual([`skipping ${root}/teams/payments/notes: symlink (not followed)`]);
  });
});

describe('the observer', () => {
  it('is told each directory before it is listed, what each pack scan listed, and which packs exist', async () => {
    await put({ 'account/a.md': 'a', 'teams/payments/runbooks/db.md': 'db' });
    const calls: string[] = [];
    const observer: ScanObserver = {
      listing: (dir, scope) => calls.push(`listing ${dir.slice(root.length) || '/'} ${scope}`),
      packScanned: (scope, dirs, within) => calls.push(`scanned ${scope} [${[...dirs].map((d) => d.slice(root.length)).sort().join(' ')}] within [${within.map((d) => d.slice(root.length)).join(' ')}]`),
      packsPresent: (scopes) => calls.push(`present ${[...scopes].join(' ')}`),
    };
    const store = storeOf({ observer });
    await store.scan();
    expect(calls).toEqual([
      'listing / null',
      'listing /teams null',
      'present account team_payments',
      'listing /account account',
      'scanned account [/account] within [/account]',
      'listing /teams/payments team_payments',
      'listing /teams/payments/runbooks team_payments',
      'scanned team_payments [/teams/payments /teams/payments/runbooks] within [/teams/payments]',
    ]);
    calls.length = 0;
    await store.scan(new Map([['team_payments', new Set(['runbooks'])]]));
    expect(calls).toEqual([
      'listing / null',
      'listing /teams null',
      'present account team_payments',
      'listing /teams/payments/runbooks team_payments',
      'scanned team_payments [/teams/payments/runbooks] within [/teams/payments/runbooks]',
    ]);
  });
});

describe('read', () => {
  async function scanned(files: Record<string, string>, maxFileSize?: number): Promise<DirPackStore> {
    await put(files);
    const store = storeOf(maxFileSize === undefined ? {} : { maxFileSize });
    await store.scan();
    return store;
  }

  it('the bytes with their sha256, size and mtime; null for what the snapshot does not hold', async () => {
    const store = await scanned({ 'account/a.md': 'alpha', 'teams/payments/r/b.md': 'beta' });
    await utimes(join(root, 'teams/payments/r/b.md'), 1000, 1_700_000_000.25);
    await store.scan();
    const mtimeMs = 1_700_000_000_250;
    expect(await store.read('team_payments', 'r/b.md')).toEqual({ bytes: Buffer.from('beta'), sha256: sha('beta'), size: 4, mtimeMs });
    expect(store.readSmallSync('team_payments', 'r/b.md')).toEqual({ bytes: Buffer.from('beta'), sha256: sha('beta'), size: 4, mtimeMs });
    for (const [scope, path] of [['account', 'missing.md'], ['team_nope', 'a.md'], ['team_payments', 'a.md'], ['bad scope', 'a.md'], ['account', '../account/a.md']] as const) {
      expect(await store.read(scope as ScopeName, path)).toBeNull();
      expect(store.readSmallSync(scope as ScopeName, path)).toBeNull();
    }
  });

  it('a file changed since the scan: the fresh bytes and their hash, and the snapshot takes them at once', async () => {
    const store = await scanned({ 'account/a.md': 'old', 'account/b.md': 'b' });
    const generation = store.generation;
    await writeFile(join(root, 'account/a.md'), 'newer');
    const read = await store.read('account', 'a.md');
    expect(read).toMatchObject({ bytes: Buffer.from('newer'), sha256: sha('newer'), size: 5 });
    expect(store.snapshot('account')?.files).toEqual([
      { path: 'a.md', size: 5, mtimeMs: read?.mtimeMs, sha256: sha('newer') },
      { path: 'b.md', size: 1, mtimeMs: expect.any(Number), sha256: sha('b') },
    ]);
    expect(store.generation).toBe(generation + 1);
    // The entry has no fingerprint: the next scan hashes the file again (same version), then knows it.
    const version = store.snapshot('account')?.version;
    expect(await store.scan()).toBe(true);
    expect(store.snapshot('account')?.version).toBe(version);
    expect(await store.scan()).toBe(false);
    const afterScans = store.generation;
    await writeFile(join(root, 'account/b.md'), 'bb');
    expect(store.readSmallSync('account', 'b.md')).toMatchObject({ bytes: Buffer.from('bb'), sha256: sha('bb') });
    expect(store.snapshot('account')?.files[1]).toMatchObject({ size: 2, sha256: sha('bb') });
    expect(store.generation).toBe(afterScans + 1);
  });

  it('bytes changed with the size and mtime kept: found by their hash', async () => {
    const store = await scanned({ 'account/a.md': 'one' });
    const mtime = (store.snapshot('account')?.files[0]?.mtimeMs ?? 0) / 1000;
    await writeFile(join(root, 'account/a.md'), 'two');
    await utimes(join(root, 'account/a.md'), mtime, mtime);
    expect((await store.read('account', 'a.md'))?.sha256).toBe(sha('two'));
    expect(store.snapshot('account')?.files[0]?.sha256).toBe(sha('two'));
    await writeFile(join(root, 'account/a.md'), 'six');
    await utimes(join(root, 'account/a.md'), mtime, mtime);
    expect(store.readSmallSync('account', 'a.md')?.sha256).toBe(sha('six'));
    expect(store.snapshot('account')?.files[0]?.sha256).toBe(sha('six'));
  });

  it('reads close every file they open', async () => {
    const store = await scanned({ 'account/a.md': 'a', 'account/big.md': 'b'.repeat(SYNC_HASH_BYTES + 1), 'account/dir/x.md': 'x' });
    await rm(join(root, 'account/dir/x.md'));
    await mkdir(join(root, 'account/dir/x.md'));
    const before = openDescriptors();
    for (let i = 0; i < 20; i++) {
      await store.read('account', 'a.md');
      await store.read('account', 'big.md');
      await store.read('account', 'dir/x.md');
      store.readSmallSync('account', 'a.md');
      store.readSmallSync('account', 'dir/x.md');
      await hashFile(join(root, 'account/a.md'), 1);
      await hashFile(join(root, 'account/big.md'), SYNC_HASH_BYTES + 1);
    }
    expect(openDescriptors()).toBe(before);
  });

  it('an unchanged file read again changes nothing', async () => {
    const store = await scanned({ 'account/a.md': 'a' });
    const snapshot = store.snapshot('account');
    await store.read('account', 'a.md');
    store.readSmallSync('account', 'a.md');
    expect(store.snapshot('account')).toBe(snapshot);
    expect(store.generation).toBe(1);
  });

  it('only the mtime changed: the snapshot takes the new mtime', async () => {
    const store = await scanned({ 'account/a.md': 'a' });
    await utimes(join(root, 'account/a.md'), 1000, 1_600_000_000);
    expect((await store.read('account', 'a.md'))?.mtimeMs).toBe(1_600_000_000_000);
    expect(store.snapshot('account')?.files[0]?.mtimeMs).toBe(1_600_000_000_000);
  });

  it('a file that grew past the limit, vanished or became a link or a directory is not served', async () => {
    // The limit is far above a directory's size: only its kind keeps it from being read.
    const store = await scanned({ 'account/grew.md': 'g', 'account/gone.md': 'x', 'account/link.md': 'l', 'account/dir.md': 'd', 'account/target.md': 't' }, 1000);
    await writeFile(join(root, 'account/grew.md'), 'g'.repeat(1001));
    await rm(join(root, 'account/gone.md'));
    await rm(join(root, 'account/link.md'));
    await symlink(join(root, 'account/target.md'), join(root, 'account/link.md'));
    await rm(join(root, 'account/dir.md'));
    await mkdir(join(root, 'account/dir.md'));
    for (const path of ['grew.md', 'gone.md', 'link.md', 'dir.md']) {
      expect(await store.read('account', path), path).toBeNull();
      expect(store.readSmallSync('account', path), path).toBeNull();
    }
    expect(store.generation).toBe(1);
  });

  it('a directory on the way swapped for a link: not served, even to the same bytes', async () => {
    const store = await scanned({ 'teams/payments/r/b.md': 'beta', 'teams/payments/c.md': 'c' });
    await rename(join(root, 'teams/payments/r'), join(root, 'moved'));
    await symlink(join(root, 'moved'), join(root, 'teams/payments/r'));
    expect(await store.read('team_payments', 'r/b.md')).toBeNull();
    expect(store.readSmallSync('team_payments', 'r/b.md')).toBeNull();
    await rm(join(root, 'teams/payments/r'));
    expect(await store.read('team_payments', 'r/b.md')).toBeNull(); // its directory is gone
    expect(store.readSmallSync('team_payments', 'r/b.md')).toBeNull();
    expect(await store.read('team_payments', 'c.md')).toMatchObject({ bytes: Buffer.from('c') });
  });

  it('readSmallSync: undefined for a file too large for it; a batch reuses the directories it resolved', async () => {
    const big = 'x'.repeat(SYNC_HASH_BYTES + 1);
    const store = await scanned({ 'account/big.md': big, 'account/r/a.md': 'a', 'account/r/b.md': 'b', 'account/edge.md': 'e'.repeat(SYNC_HASH_BYTES) });
    expect(store.readSmallSync('account', 'big.md')).toBeUndefined();
    expect((await store.read('account', 'big.md'))?.sha256).toBe(sha(big));
    expect(store.readSmallSync('account', 'edge.md')?.size).toBe(SYNC_HASH_BYTES);
    const parents = new Map<string, string | null>();
    expect(store.readSmallSync('account', 'r/a.md', parents)?.bytes.toString()).toBe('a');
    expect([...parents]).toEqual([[join(root, 'account/r'), join(root, 'account/r')]]);
    // What the batch resolved is believed for the rest of it: a wrong entry refuses.
    parents.set(join(root, 'account/r'), '/elsewhere');
    expect(store.readSmallSync('account', 'r/b.md', parents)).toBeNull();
    parents.set(join(root, 'account/r'), null);
    expect(store.readSmallSync('account', 'r/b.md', parents)).toBeNull();
    await rm(join(root, 'account/r'), { recursive: true });
    const fresh = new Map<string, string | null>();
    expect(store.readSmallSync('account', 'r/b.md', fresh)).toBeNull();
    expect([...fresh]).toEqual([[join(root, 'account/r'), null]]);
  });

  it('a data dir reached through a link serves its files (the real path is compared)', async () => {
    await put({ 'account/a.md': 'a' });
    const via = `${root}-link`;
    await symlink(root, via);
    try {
      const store = new DirPackStore(via, { maxFileSize: 1024, log: (line) => log.push(line) });
      await store.scan();
      expect((await store.read('account', 'a.md'))?.bytes.toString()).toBe('a');
      const fresh = new DirPackStore(via, { maxFileSize: 1024, log: (line) => log.push(line) });
      await fresh.scan();
      expect(fresh.readSmallSync('account', 'a.md')?.bytes.toString()).toBe('a');
    } finally {
      await rm(via);
    }
  });
});

describe('dir-pack-entries', () => {
  it('logOnce: one line per key, and the memory of keys is bounded', () => {
    const lines: string[] = [];
    const entries = new PackEntries({ log: (line) => lines.push(line), maxFileSize: 1 });
    entries.logOnce('k', 'first');
    entries.logOnce('k', 'again');
    expect(lines).toEqual(['first']);
    for (let i = 1; i < MAX_LOGGED; i++) entries.logOnce(`key ${i}`, 'x');
    expect(lines.length).toBe(MAX_LOGGED);
    entries.logOnce('k', 'still known');
    expect(lines.length).toBe(MAX_LOGGED);
    entries.logOnce('one more', 'forgets the rest');
    entries.logOnce('k', 'said again');
    expect(lines.slice(-2)).toEqual(['forgets the rest', 'said again']);
  });

  it('lstatOrSkip, listDir: undefined or null for what is missing, said once for what cannot be read', async () => {
    const lines: string[] = [];
    const entries = new PackEntries({ log: (line) => lines.push(line), maxFileSize: 1 });
    expect(entries.lstatOrSkip(join(root, 'missing'))).toBeUndefined();
    expect(entries.listDir(join(root, 'missing'))).toBeNull();
    expect(lines).toEqual([]);
    await writeFile(join(root, 'file'), 'x');
    expect(entries.listDir(join(root, 'file'))).toBeNull();
    expect(entries.lstatOrSkip(join(root, 'file', 'below'))).toBeUndefined();
    expect(lines).toEqual([`skipping ${root}/file: cannot list directory (ENOTDIR)`, `skipping ${root}/file/below: cannot be read (ENOTDIR)`]);
    expect(entries.lstatOrSkip(join(root, 'file'))?.isFile()).toBe(true);
  });

  it('insidePack: true while each directory is reached without a link or is gone', async () => {
    await put({ 'p/a/x.md': 'x', 'elsewhere/y.md': 'y' });
    const pack = join(root, 'p');
    expect(insidePack(pack, ['a', 'gone', 'a/deeper'])).toBe(true);
    await symlink(join(root, 'elsewhere'), join(root, 'p/b'));
    expect(insidePack(pack, ['a', 'b'])).toBe(false);
    expect(insidePack(pack, ['b/y.md'])).toBe(false);
    await symlink(join(root, 'loop'), join(root, 'loop'));
    expect(insidePack(root, ['loop'])).toBe(false); // ELOOP, not ENOENT
    expect(insidePack(join(root, 'missing'), [])).toBe(false);
  });

  it('hashFile: small and large files alike; null for a link or a missing file', async () => {
    const big = Buffer.alloc(SYNC_HASH_BYTES + 10, 7);
    await put({ small: 'small', big });
    await symlink(join(root, 'small'), join(root, 'link'));
    expect(await hashFile(join(root, 'small'), 5)).toBe(sha('small'));
    expect(await hashFile(join(root, 'big'), big.length)).toBe(sha(big));
    // The size only picks how to read: the bytes are hashed whatever it says.
    expect(await hashFile(join(root, 'big'), 1)).toBe(sha(big));
    expect(await hashFile(join(root, 'small'), SYNC_HASH_BYTES + 1)).toBe(sha('small'));
    expect(await hashFile(join(root, 'link'), 5)).toBeNull();
    expect(await hashFile(join(root, 'link'), SYNC_HASH_BYTES + 1)).toBeNull();
    expect(await hashFile(join(root, 'missing'), 5)).toBeNull();
  });
});
