// The libfuse 3 adapter in-process, with a recording stand-in for the addon:
// node ids are tree inodes, the kernel's lookup counts are kept until it
// forgets them, an open of a replaced inode is ESTALE, a held handle keeps
// its version, and a tree swap notifies exactly the changed names under
// directories the kernel holds. (test/mount-native.test.ts drives the real
// addon through a real mount.)

import { constants as fsConstants } from 'node:fs';
import { constants } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ROOT_INO, Tree } from '../src/core/tree/tree.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { KnowledgeFilesystem } from '../src/daemon/filesystem.js';
import { GrantCache } from '../src/daemon/content/grant-cache.js';
import { FAST_DIR_BIT, FAST_DIR_SCOPE, FAST_FH, type NativeAddon } from '../src/daemon/fuse/native-addon-api.js';
import { NATIVE_CACHE_SEC, NativeFuseSession } from '../src/daemon/fuse/native-fuse-adapter.js';
import { FakeControlClient } from './helpers/fake-control-client.js';

const E = constants.errno;
type Handler = Parameters<NativeAddon['mount']>[2];
type Call = [string, ...unknown[]];

// Request kinds as native/knowledgefs_fuse.h numbers them.
const LOOKUP = 1;
const FORGET = 2;
const GETATTR = 3;
const OPEN = 4;
const READ = 5;
const RELEASE = 6;
const OPENDIR = 7;
const READDIR = 8;
const RELEASEDIR = 9;
const READDIRPLUS = 13;

class RecordingAddon implements NativeAddon {
  handler: Handler = () => undefined;
  options = '';
  readonly calls: Call[] = [];
  mount(_mountpoint: string, options: string, handler: Handler): void {
    this.options = options;
    this.handler = handler;
  }
  unmount(): void {
    this.calls.push(['unmount']);
  }
  unref(): void {}
  replyErr(req: number, errno: number): void {
    this.calls.push(['err', req, errno]);
  }
  replyEntry(req: number, ino: number, _mode: number, size: number, _mtime: number, _nlink: number, _uid: number, _gid: number, attrTimeout: number, entryTimeout: number): void {
    this.calls.push(['entry', req, ino, size, attrTimeout, entryTimeout]);
  }
  replyAttr(req: number, ino: number, _mode: number, size: number): void {
    this.calls.push(['attr', req, ino, size]);
  }
  replyOpen(req: number, fh: number, keepCache: boolean, cacheDir: boolean): void {
    this.calls.push(['open', req, fh, keepCache, cacheDir]);
  }
  replyBuf(req: number, data: Buffer): void {
    this.calls.push(['buf', req, data.toString()]);
  }
  replyDir(req: number, _size: number, first: number, names: string[], inos: number[]): number {
    this.calls.push(['dir', req, first, [...names], [...inos]]);
    return names.length;
  }
  /** How many entries a READDIRPLUS reply takes (the rest do not fit), like the buffer size does in the addon. */
  plusFits = Infinity;
  replyDirPlus(req: number, _size: number, first: number, names: string[], stats: Float64Array, attrTimeout: number, entryTimeout: number): number {
    const n = Math.min(names.length, this.plusFits);
    const rows = names.slice(0, n).map((name, i) => [name, stats[i * 7], stats[i * 7 + 2]]);
    this.calls.push(['dirplus', req, first, rows, attrTimeout, entryTimeout]);
    return n;
  }
  replyStatfs(req: number, blocks: number, files: number): void {
    this.calls.push(['statfs', req, blocks, files]);
  }
  invalEntry(parentIno: number, name: string): void {
    this.calls.push(['invalEntry', parentIno, name]);
  }
  invalInode(ino: number): void {
    this.calls.push(['invalInode', ino]);
  }
  /** The addon's fast path as JavaScript told it: servable node ids and each scope's grant deadline. */
  readonly fastNodes = new Map<number, number>();
  readonly grantUntil = new Map<number, number>();
  fastAllow(ino: number, scopeId: number): void {
    this.fastNodes.set(ino, scopeId);
  }
  fastDrop(ino: number): void {
    this.fastNodes.delete(ino);
  }
  fastGrant(scopeId: number, untilMs: number): void {
    this.grantUntil.set(scopeId, untilMs);
  }
  fastCounts(): [number, number, number, number] {
    return [0, 0, 0, 0];
  }
  readonly used = new Set<number>();
  fastTakeUsed(scopeId: number): boolean {
    return this.used.delete(scopeId);
  }
  /** What the addon's ll_open decides for a read-only open of `ino` at `now`: answered by itself? (It notes the scope as used.) */
  servesOpen(ino: number, now = Date.now()): boolean {
    const scope = this.fastNodes.get(ino);
    const serves = scope !== undefined && now < (this.grantUntil.get(scope) ?? 0);
    if (serves) this.used.add(scope);
    return serves;
  }
}

function harness(grantTtlMs = 5000) {
  const client = new FakeControlClient();
  client.put('account/DUTY.md', '# Account\n');
  client.put('account/runbooks/a.md', 'alpha\n');
  client.put('team_x/DUTY.md', '# X\n');
  let tree = Tree.fromPlan(client.currentPlan(), undefined);
  const fs = new KnowledgeFilesystem({
    tree: () => tree,
    grants: new GrantCache(client, grantTtlMs),
    fetcher: new ContentFetcher({ client, cache: new ContentCache({ maxBytes: 1 << 20 }) }),
    requestTimeoutMs: 2000,
  });
  const addon = new RecordingAddon();
  const session = new NativeFuseSession(addon, fs, { tree: () => tree, requestTimeoutMs: 2000, log: () => undefined });
  session.mount('/mnt/knowledge');
  let req = 100;
  /** Sends one request; resolves with the reply it got (waiting for an open that asks the control plane). */
  const ask = async (op: number, ino: number, fh = 0, a = 0, b = 0, extra?: string | Float64Array): Promise<Call> => {
    const id = ++req;
    addon.handler(op, id, ino, fh, a, b, extra);
    for (let i = 0; i < 100; i++) {
      const reply = addon.calls.find((c) => c[1] === id);
      if (reply !== undefined) return reply;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`no reply to request ${id}`);
  };
  const swap = (next: Tree) => {
    const before = tree;
    tree = next;
    session.treeChanged(before, next);
  };
  return { client, addon, session, ask, swap, tree: () => tree, fs };
}

const inoOf = (call: Call) => call[2] as number;

describe('native adapter', () => {
  it('lookups answer tree inodes with hour-long caches; a missing name is a cached miss; opens keep the page cache', async () => {
    const h = harness();
    const account = await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account');
    expect(account).toEqual(['entry', 101, h.tree().get('/account')?.stat.ino, 4096, NATIVE_CACHE_SEC, NATIVE_CACHE_SEC]);
    const duty = await h.ask(LOOKUP, inoOf(account), 0, 0, 0, 'DUTY.md');
    expect(inoOf(duty)).toBe(h.tree().get('/account/DUTY.md')?.stat.ino);
    expect(await h.ask(LOOKUP, inoOf(account), 0, 0, 0, 'nope.md')).toEqual(['entry', 103, 0, 0, 0, NATIVE_CACHE_SEC]);
    expect(await h.ask(GETATTR, inoOf(duty))).toEqual(['attr', 104, inoOf(duty), 10]);
    const opened = await h.ask(OPEN, inoOf(duty), 0, fsConstants.O_RDONLY);
    expect(opened.slice(3)).toEqual([true, false]);
    expect(await h.ask(READ, inoOf(duty), opened[2] as number, 4096, 0)).toEqual(['buf', 106, '# Account\n']);
    expect(await h.ask(RELEASE, inoOf(duty), opened[2] as number)).toEqual(['err', 107, 0]);
    expect((await h.ask(OPEN, inoOf(duty), 0, fsConstants.O_WRONLY))[2]).toBe(E.EROFS);
    expect(h.addon.options).toBe('fsname=knowledgefs,subtype=knowledgefs,ro');
  });

  it('a change: only names under held directories are invalidated; the old inode keeps its stat, opens of it are ESTALE, a held handle keeps its bytes', async () => {
    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const oldDuty = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    const held = (await h.ask(OPEN, oldDuty, 0, fsConstants.O_RDONLY))[2] as number;

    h.client.put('account/DUTY.md', '# Account, edited\n');
    h.client.put('team_x/new.md', 'new\n');
    h.addon.calls.length = 0;
    h.swap(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    // DUTY.md under a held directory; team_x was never looked up, so nothing under it is sent.
    expect(h.addon.calls).toContainEqual(['invalEntry', account, 'DUTY.md']);
    expect(h.addon.calls.filter((c) => c[0] === 'invalEntry')).toEqual([['invalEntry', account, 'DUTY.md']]);
    // Same names and mtimes in account/ (the edit kept its mtime); team_x/ changed but the kernel does not hold it.
    expect(h.addon.calls.filter((c) => c[0] === 'invalInode')).toEqual([]);

    expect(await h.ask(GETATTR, oldDuty)).toEqual(['attr', expect.any(Number), oldDuty, 10]);
    expect((await h.ask(OPEN, oldDuty, 0, fsConstants.O_RDONLY))[2]).toBe(E.ESTALE);
    expect((await h.ask(READ, oldDuty, held, 4096, 0))[2]).toBe('# Account\n');
    const newDuty = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    expect(newDuty).not.toBe(oldDuty);
    const fresh = (await h.ask(OPEN, newDuty, 0, fsConstants.O_RDONLY))[2] as number;
    expect((await h.ask(READ, newDuty, fresh, 4096, 0))[2]).toBe('# Account, edited\n');
  });

  it('forgotten inodes are dropped: their node id no longer resolves and no notification names them', async () => {
    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const runbooks = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'runbooks'));
    await h.ask(LOOKUP, account, 0, 0, 0, 'runbooks'); // looked up twice
    h.addon.handler(FORGET, 0, 0, 0, 0, 0, new Float64Array([runbooks, 1]));
    expect((await h.ask(GETATTR, runbooks))[0]).toBe('attr'); // one lookup left
    h.addon.handler(FORGET, 0, 0, 0, 0, 0, new Float64Array([runbooks, 1]));
    expect(await h.ask(GETATTR, runbooks)).toEqual(['err', expect.any(Number), E.ENOENT]);

    h.client.put('account/runbooks/a.md', 'alpha, edited\n');
    h.addon.calls.length = 0;
    h.swap(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    expect(h.addon.calls.filter((c) => c[0] === 'invalEntry')).toEqual([]);
  });

  it('readdir lists ".", ".." and the names with their inodes, from any offset', async () => {
    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const dir = await h.ask(OPENDIR, account);
    expect(dir.slice(3)).toEqual([true, true]); // the kernel caches the listing, across descriptors too
    const t = h.tree();
    const all = await h.ask(READDIR, account, dir[2] as number, 4096, 0);
    expect(all[3]).toEqual(['.', '..', 'DUTY.md', 'runbooks']);
    expect(all[4]).toEqual([account, ROOT_INO, t.get('/account/DUTY.md')?.stat.ino, t.get('/account/runbooks')?.stat.ino]);
    expect((await h.ask(READDIR, account, dir[2] as number, 4096, 3))[3]).toEqual(['runbooks']);
    expect((await h.ask(READDIR, account, dir[2] as number, 4096, 4))[3]).toEqual([]);
  });

  it('fast path: a node opened here is answered by the addon while its scope\'s grant is fresh, with the deadline the core holds', async () => {
    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const duty = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    const runbooks = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'runbooks'));
    const a = inoOf(await h.ask(LOOKUP, runbooks, 0, 0, 0, 'a.md'));
    expect(h.addon.servesOpen(duty)).toBe(false); // never opened: the first open is the core's
    const asked = Date.now();
    await h.ask(OPEN, duty, 0, fsConstants.O_RDONLY);
    expect(h.addon.servesOpen(duty)).toBe(true);
    expect(h.addon.servesOpen(a)).toBe(false); // same scope, not opened yet
    const until = [...h.addon.grantUntil.values()][0] as number;
    expect(until).toBeGreaterThanOrEqual(asked + 5000);
    expect(until).toBeLessThanOrEqual(Date.now() + 5000);
    expect(h.addon.servesOpen(duty, until)).toBe(false); // not one moment past the grant
    // A read of a handle the addon opened is served by node id.
    expect(await h.ask(READ, duty, FAST_FH, 4096, 2)).toEqual(['buf', expect.any(Number), 'Account\n']);
    expect(await h.ask(RELEASE, duty, FAST_FH)).toEqual(['err', expect.any(Number), 0]);
  });

  it('fast path: --grant-ttl 0 never; an edit, a lost scope, a forget and a revoked session take nodes off it at the swap', async () => {
    const strict = harness(0);
    const account0 = inoOf(await strict.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const duty0 = inoOf(await strict.ask(LOOKUP, account0, 0, 0, 0, 'DUTY.md'));
    await strict.ask(OPEN, duty0, 0, fsConstants.O_RDONLY);
    expect(strict.addon.servesOpen(duty0)).toBe(false);

    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const duty = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    const team = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'team_x'));
    const x = inoOf(await h.ask(LOOKUP, team, 0, 0, 0, 'DUTY.md'));
    const runbooks = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'runbooks'));
    const a = inoOf(await h.ask(LOOKUP, runbooks, 0, 0, 0, 'a.md'));
    for (const ino of [duty, x, a]) await h.ask(OPEN, ino, 0, fsConstants.O_RDONLY);
    expect([duty, x, a].map((ino) => h.addon.servesOpen(ino))).toEqual([true, true, true]);

    // An edit: the old version's node id leaves (its open is ESTALE in the core), the others stay.
    h.client.put('account/DUTY.md', '# Account, edited\n');
    h.swap(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    expect([duty, x, a].map((ino) => h.addon.servesOpen(ino))).toEqual([false, true, true]);

    // The scope leaves the tree (creator removed from the team): its nodes leave at the swap, and its grant.
    h.swap(h.tree().withoutScope('team_x'));
    expect(h.addon.servesOpen(x)).toBe(false);
    expect(await h.ask(READ, x, FAST_FH, 4096, 0)).toEqual(['err', expect.any(Number), E.ESTALE]);

    // The kernel forgets a node: it leaves too.
    h.addon.handler(FORGET, 0, 0, 0, 0, 0, new Float64Array([a, 1]));
    expect(h.addon.servesOpen(a)).toBe(false);

    // The session revoked (the tree emptied): nothing stays.
    const edited = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    await h.ask(OPEN, edited, 0, fsConstants.O_RDONLY);
    expect(h.addon.servesOpen(edited)).toBe(true);
    h.swap(Tree.empty({}, h.tree()));
    expect(h.addon.servesOpen(edited)).toBe(false);
  });

  it('readdirplus: each entry with its attributes and hour-long caches; the kernel holds a lookup of each that fitted, not of "." or ".."', async () => {
    const h = harness();
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const dir = await h.ask(OPENDIR, account);
    const t = h.tree();
    const duty = t.get('/account/DUTY.md')!.stat.ino;
    const runbooks = t.get('/account/runbooks')!.stat.ino;
    h.addon.plusFits = 3; // ".", "..", DUTY.md
    const first = await h.ask(READDIRPLUS, account, dir[2] as number, 4096, 0);
    expect(first).toEqual(['dirplus', expect.any(Number), 0, [['.', account, 4096], ['..', ROOT_INO, expect.any(Number)], ['DUTY.md', duty, 10]], NATIVE_CACHE_SEC, NATIVE_CACHE_SEC]);
    h.addon.plusFits = Infinity;
    expect((await h.ask(READDIRPLUS, account, dir[2] as number, 4096, 3))[3]).toEqual([['runbooks', runbooks, 4096]]);
    // DUTY.md and runbooks are held once each now (their node ids resolve), so one FORGET of each lets them go.
    expect((await h.ask(GETATTR, duty))[0]).toBe('attr');
    expect((await h.ask(GETATTR, runbooks))[0]).toBe('attr');
    h.addon.handler(FORGET, 0, 0, 0, 0, 0, new Float64Array([duty, 1, runbooks, 1]));
    expect(await h.ask(GETATTR, duty)).toEqual(['err', expect.any(Number), E.ENOENT]);
    expect(await h.ask(GETATTR, runbooks)).toEqual(['err', expect.any(Number), E.ENOENT]);
    // The directory itself was looked up once and listed as ".": still held.
    expect((await h.ask(GETATTR, account))[0]).toBe('attr');
  });

  it('fast path: a grant the addon used is asked for again before it lapses; one it did not use lapses', async () => {
    const h = harness(300);
    const account = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'account'));
    const duty = inoOf(await h.ask(LOOKUP, account, 0, 0, 0, 'DUTY.md'));
    await h.ask(OPEN, duty, 0, fsConstants.O_RDONLY);
    expect(h.client.calls.grant).toBe(1);
    const firstUntil = [...h.addon.grantUntil.values()][0] as number;
    expect(h.addon.servesOpen(duty)).toBe(true); // warm opens, answered by the addon: the core never sees them
    // At 80 % of the TTL the grant is asked for again, so the addon's deadline moves on before it passes.
    await new Promise((r) => setTimeout(r, 280));
    expect(h.client.calls.grant).toBe(2);
    const renewed = [...h.addon.grantUntil.values()][0] as number;
    expect(renewed).toBeGreaterThan(firstUntil);
    expect(renewed).toBeGreaterThan(Date.now());
    // Not used since: no more requests, and the grant lapses.
    await new Promise((r) => setTimeout(r, 400));
    expect(h.client.calls.grant).toBe(2);
    expect(h.addon.servesOpen(duty)).toBe(false);
  });

  it('fast path: a directory opened here is opened by the addon next time; a listing of such a handle starts from the current tree, and lists nothing once the directory is gone', async () => {
    const h = harness();
    const team = inoOf(await h.ask(LOOKUP, ROOT_INO, 0, 0, 0, 'team_x'));
    expect(h.addon.fastNodes.has(team)).toBe(false);
    const dir = await h.ask(OPENDIR, team);
    expect(h.addon.fastNodes.get(team)).toBe(FAST_DIR_SCOPE);
    await h.ask(RELEASEDIR, team, dir[2] as number);
    // The addon answered the next opendir with a handle of its own; the kernel's cache missed, so its listing comes here.
    const fh = FAST_DIR_BIT + 7;
    expect((await h.ask(READDIR, team, fh, 4096, 0))[3]).toEqual(['.', '..', 'DUTY.md']);
    h.client.put('team_x/new.md', 'new\n');
    h.swap(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    expect(h.addon.fastNodes.get(team)).toBe(FAST_DIR_SCOPE); // a directory keeps its node id while it stays one
    expect((await h.ask(READDIR, team, fh, 4096, 3))[3]).toEqual([]); // a listing in progress finishes from its tree
    expect((await h.ask(READDIR, team, fh, 4096, 0))[3]).toEqual(['.', '..', 'DUTY.md', 'new.md']); // a rewind reads the current one
    expect(await h.ask(RELEASEDIR, team, fh)).toEqual(['err', expect.any(Number), 0]);
    // The team leaves: its directory leaves the fast path, and a handle the addon opened lists nothing.
    h.swap(h.tree().withoutScope('team_x'));
    expect(h.addon.fastNodes.has(team)).toBe(false);
    expect((await h.ask(READDIR, team, FAST_DIR_BIT + 8, 4096, 0))[3]).toEqual([]);
  });
});
