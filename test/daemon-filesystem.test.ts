// The filesystem core in-process (no FUSE): metadata from the tree, opens
// that authorise and verify, handles pinned to one version, coalesced
// fetches, denials that remove the scope, bounded opens.

import { constants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KnowledgeError, type ErrorCode } from '../src/core/errors.js';
import { Tree } from '../src/core/tree/tree.js';
import { ChangedFiles } from '../src/daemon/fuse/changed-files.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import { ESTALE, ErrnoError } from '../src/daemon/fuse/errno.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { KnowledgeFilesystem } from '../src/daemon/filesystem.js';
import { GrantCache } from '../src/daemon/content/grant-cache.js';
import { FakeControlClient } from './helpers/fake-control-client.js';
import { waitFor } from './helpers/mount.js';

interface Harness {
  client: FakeControlClient;
  fs: KnowledgeFilesystem;
  tree: () => Tree;
  setTree: (t: Tree) => void;
  denied: string[];
  missing: string[];
  stale: string[];
  clock: { now: number };
  fetcher: ContentFetcher;
}

function harness(opts: { grantTtlMs?: number; requestTimeoutMs?: number; cacheBytes?: number; changedFiles?: ChangedFiles } = {}): Harness {
  const client = new FakeControlClient();
  client.put('account/DUTY.md', '# Account\n');
  client.put('account/runbooks/a.md', 'alpha\n');
  client.put('team_x/DUTY.md', '# X\n');
  client.put('team_x/notes.md', 'x notes\n');
  let tree = Tree.fromPlan(client.currentPlan(), undefined);
  const clock = { now: 1000 };
  const denied: string[] = [];
  const missing: string[] = [];
  const stale: string[] = [];
  const fetcher = new ContentFetcher({
    client,
    cache: new ContentCache({ maxBytes: opts.cacheBytes ?? 1 << 20 }),
    onStale: (ref) => stale.push(`${ref.scope}/${ref.scopePath}`),
  });
  const h: Harness = {
    client,
    tree: () => tree,
    setTree: (t) => {
      tree = t;
    },
    denied,
    missing,
    stale,
    clock,
    fetcher,
    fs: new KnowledgeFilesystem({
      tree: () => tree,
      grants: new GrantCache(client, opts.grantTtlMs ?? 5000, () => clock.now),
      fetcher,
      requestTimeoutMs: opts.requestTimeoutMs ?? 2000,
      onDenied: (scope) => {
        denied.push(scope);
        tree = tree.withoutScope(scope);
      },
      onMissing: (path) => missing.push(path),
      changedFiles: opts.changedFiles,
    }),
  };
  return h;
}

async function codeOf(p: () => unknown): Promise<ErrorCode | number | 'ok'> {
  try {
    await p();
    return 'ok';
  } catch (err) {
    if (err instanceof KnowledgeError) return err.code;
    if (err instanceof ErrnoError) return err.errno;
    throw err;
  }
}

function readAll(fs: KnowledgeFilesystem, fd: number, size: number): string {
  const out = Buffer.alloc(size + 10);
  const n = fs.read(fd, out, out.length, 0);
  return out.subarray(0, n).toString();
}

describe('metadata', () => {
  let h: Harness;
  beforeEach(() => {
    h = harness();
  });

  it('getattr and readdir answer from the tree without the network', async () => {
    expect(h.fs.readdir('/')).toEqual(['account', 'team_x']);
    expect(h.fs.readdir('/account')).toEqual(['DUTY.md', 'runbooks']);
    expect(h.fs.getattr('/account/runbooks/a.md').size).toBe(6);
    expect(h.fs.getattr('/account/runbooks/a.md').mode & 0o777).toBe(0o444);
    expect(h.fs.getattr('/team_x').mode & 0o777).toBe(0o555);
    expect(await codeOf(() => h.fs.getattr('/team_y'))).toBe('not_found');
    expect(await codeOf(() => h.fs.readdir('/account/DUTY.md'))).toBe(osConstants.errno.ENOTDIR);
    expect(h.client.calls).toMatchObject({ grant: 0, file: 0, plan: 0 });
  });

  it('access: existing paths are readable, never writable', async () => {
    expect(await codeOf(() => h.fs.access('/account/DUTY.md', constants.R_OK))).toBe('ok');
    expect(await codeOf(() => h.fs.access('/account/DUTY.md', constants.W_OK))).toBe('read_only');
    expect(await codeOf(() => h.fs.access('/nope', constants.R_OK))).toBe('not_found');
  });

  it('statfs reports the tree size', () => {
    // 28 bytes in 4 files: one 4 KiB block; nothing free.
    expect(h.fs.statfs()).toEqual({ bsize: 4096, frsize: 4096, blocks: 1, bfree: 0, bavail: 0, files: 4, ffree: 0, favail: 0, namemax: 255 });
    h.client.put('team_x/big.bin', Buffer.alloc(10_000, 1));
    h.setTree(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    expect(h.fs.statfs()).toMatchObject({ blocks: 3, bfree: 0, bavail: 0, files: 5 }); // ceil(10 028 / 4096)
  });
});

describe('open', () => {
  it('write intent is EROFS before anything else', async () => {
    const h = harness();
    for (const flag of [constants.O_WRONLY, constants.O_RDWR, constants.O_RDONLY | constants.O_TRUNC, constants.O_RDONLY | constants.O_APPEND, constants.O_CREAT]) {
      expect(await codeOf(() => h.fs.open('/account/DUTY.md', flag))).toBe('read_only');
    }
    expect(h.client.calls.file).toBe(0);
  });

  it('not in the tree is ENOENT without asking the control plane; a directory is EISDIR', async () => {
    const h = harness();
    expect(await codeOf(() => h.fs.open('/team_y/DUTY.md', 0))).toBe('not_found');
    expect(await codeOf(() => h.fs.open('/account', 0))).toBe(osConstants.errno.EISDIR);
    expect(h.client.calls).toMatchObject({ grant: 0, file: 0 });
  });

  it('authorises, fetches, verifies and serves the bytes; reads past the end return 0', async () => {
    const h = harness();
    const fd = await h.fs.open('/account/runbooks/a.md', 0);
    expect(readAll(h.fs, fd, 6)).toBe('alpha\n');
    const buf = Buffer.alloc(4);
    expect(h.fs.read(fd, buf, 4, 3)).toBe(3);
    expect(buf.subarray(0, 3).toString()).toBe('ha\n');
    expect(h.fs.read(fd, buf, 4, 100)).toBe(0);
    h.fs.release(fd);
    expect(await codeOf(() => h.fs.read(fd, buf, 4, 0))).toBe(osConstants.errno.EBADF);
    expect(h.client.calls).toMatchObject({ grant: 1, file: 1 });
  });

  it('concurrent opens of one file share one fetch', async () => {
    const h = harness();
    let release!: () => void;
    h.client.gate = new Promise((r) => (release = r));
    const opens = Array.from({ length: 20 }, () => h.fs.open('/team_x/notes.md', 0));
    // Release once the fetch is held at the control plane, with all 20 opens waiting on it.
    expect(await waitFor(() => h.client.calls.file >= 1, 5000, 1)).toBe(true);
    release();
    const fds = await Promise.all(opens);
    expect(new Set(fds).size).toBe(20);
    expect(h.client.calls.file).toBe(1);
    expect(h.client.calls.grant).toBe(1);
    for (const fd of fds) expect(readAll(h.fs, fd, 8)).toBe('x notes\n');
  });

  it('a node per version (no shared page cache): a handle keeps the version it opened, whatever plans arrive; new opens get the new version', async () => {
    const h = harness();
    const old = await h.fs.open('/account/runbooks/a.md', 0);
    h.client.put('account/runbooks/a.md', 'ALPHA v2 longer\n');
    h.setTree(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    const fresh = await h.fs.open('/account/runbooks/a.md', 0);
    expect(readAll(h.fs, old, 6)).toBe('alpha\n');
    expect(readAll(h.fs, fresh, 16)).toBe('ALPHA v2 longer\n');
  });

  it('a revoked scope: its handles read ESTALE with either binding, even for an unchanged file; other scopes keep reading', async () => {
    for (const changedFiles of [undefined, new ChangedFiles(0)]) {
      const h = harness({ changedFiles });
      const lost = await h.fs.open('/team_x/notes.md', 0);
      const kept = await h.fs.open('/account/DUTY.md', 0);
      expect(readAll(h.fs, lost, 8)).toBe('x notes\n');
      h.setTree(h.tree().withoutScope('team_x'));
      expect(await codeOf(() => h.fs.read(lost, Buffer.alloc(8), 8, 0))).toBe(ESTALE);
      expect(readAll(h.fs, kept, 10)).toBe('# Account\n');
      // Granted again: the held handle serves its version again (its bytes never left it).
      h.setTree(Tree.fromPlan(h.client.currentPlan(), h.tree()));
      expect(readAll(h.fs, lost, 8)).toBe('x notes\n');
    }
  });

  it('shared page cache: a handle whose path holds another version, or is gone, reads ESTALE; the same bytes under a new mtime keep reading', async () => {
    const h = harness({ changedFiles: new ChangedFiles(0) });
    const stale = await h.fs.open('/account/runbooks/a.md', 0);
    const touched = await h.fs.open('/account/DUTY.md', 0);
    const removed = await h.fs.open('/team_x/notes.md', 0);
    expect(readAll(h.fs, stale, 6)).toBe('alpha\n');
    h.client.put('account/runbooks/a.md', 'ALPHA v2 longer\n');
    h.client.put('account/DUTY.md', '# Account\n', Date.now() + 60_000);
    h.client.remove('team_x/notes.md');
    h.setTree(Tree.fromPlan(h.client.currentPlan(), h.tree()));
    expect(await codeOf(() => h.fs.read(stale, Buffer.alloc(8), 8, 0))).toBe(ESTALE);
    expect(await codeOf(() => h.fs.read(removed, Buffer.alloc(8), 8, 0))).toBe(ESTALE);
    expect(readAll(h.fs, touched, 10)).toBe('# Account\n');
    expect(readAll(h.fs, await h.fs.open('/account/runbooks/a.md', 0), 16)).toBe('ALPHA v2 longer\n');
  });

  it('bytes that do not match the plan sha256 → integrity (EIO), never served, never cached', async () => {
    const h = harness();
    h.client.fileFault = 'flip';
    expect(await codeOf(() => h.fs.open('/account/DUTY.md', 0))).toBe('integrity');
    expect(h.fetcher.isCached(h.tree().fileByScopePath('account/DUTY.md')!.sha256)).toBe(false);
    h.client.fileFault = 'none';
    const fd = await h.fs.open('/account/DUTY.md', 0);
    expect(readAll(h.fs, fd, 10)).toBe('# Account\n');
  });

  it('a file changed on the control plane after the plan → EIO and a sync is requested; never the new bytes under the old size', async () => {
    const h = harness();
    h.client.put('account/runbooks/a.md', 'same!\n'); // same size
    expect(await codeOf(() => h.fs.open('/account/runbooks/a.md', 0))).toBe('unavailable');
    h.client.put('account/DUTY.md', 'a longer account duty\n'); // grew: refused before the body is read in full
    expect(await codeOf(() => h.fs.open('/account/DUTY.md', 0))).toBe('integrity');
    expect(h.stale).toEqual(['account/runbooks/a.md', 'account/DUTY.md']);
  });

  it('denied (403) → ENOENT and the scope leaves the tree at once', async () => {
    const h = harness();
    h.client.refused.set('team_x', 'denied');
    expect(await codeOf(() => h.fs.open('/team_x/notes.md', 0))).toBe('not_found');
    expect(h.denied).toEqual(['team_x']);
    expect(h.fs.readdir('/')).toEqual(['account']);
    expect(await codeOf(() => h.fs.getattr('/team_x/notes.md'))).toBe('not_found');
  });

  it('a personal session\'s hidden denial (404 on the grant) also removes the scope', async () => {
    const h = harness();
    h.client.refused.set('team_x', 'hidden');
    expect(await codeOf(() => h.fs.open('/team_x/DUTY.md', 0))).toBe('not_found');
    expect(h.denied).toEqual(['team_x']);
  });

  it('a file gone on the control plane (scope still granted) → ENOENT and a sync request, scope kept', async () => {
    const h = harness();
    h.client.remove('account/runbooks/a.md');
    expect(await codeOf(() => h.fs.open('/account/runbooks/a.md', 0))).toBe('not_found');
    expect(h.missing).toEqual(['/account/runbooks/a.md']);
    expect(h.denied).toEqual([]);
  });

  it('control plane down → unavailable (EIO); a hang → unavailable within the request timeout', async () => {
    const h = harness({ requestTimeoutMs: 150 });
    h.client.fault = 'unavailable';
    expect(await codeOf(() => h.fs.open('/account/DUTY.md', 0))).toBe('unavailable');
    h.client.fault = 'hang';
    const started = Date.now();
    expect(await codeOf(() => h.fs.open('/account/runbooks/a.md', 0))).toBe('unavailable');
    expect(Date.now() - started).toBeLessThan(5000); // generous: proves "no hang", not speed
  });
});

describe('grants', () => {
  it('one grant per scope within the TTL; asked again after it; cached content still needs a grant', async () => {
    const h = harness({ grantTtlMs: 5000 });
    h.fs.release(await h.fs.open('/account/DUTY.md', 0));
    h.fs.release(await h.fs.open('/account/runbooks/a.md', 0));
    expect(h.client.calls.grant).toBe(1);
    h.clock.now += 5000;
    h.fs.release(await h.fs.open('/account/DUTY.md', 0));
    expect(h.client.calls.grant).toBe(2);
    expect(h.client.calls.file).toBe(2); // DUTY.md came from the cache
    // Revoked after caching: the next grant check refuses the cached bytes.
    h.clock.now += 5000;
    h.client.refused.set('account', 'hidden');
    expect(await codeOf(() => h.fs.open('/account/DUTY.md', 0))).toBe('not_found');
  });

  it('warm opens (fresh grant, bytes in memory) answer synchronously: no promise, no timer', async () => {
    const h = harness({ grantTtlMs: 5000 });
    const first = h.fs.open('/account/DUTY.md', 0);
    expect(first).toBeInstanceOf(Promise);
    h.fs.release(await first);
    const warm = h.fs.open('/account/DUTY.md', 0);
    expect(typeof warm).toBe('number');
    expect(readAll(h.fs, warm as number, 10)).toBe('# Account\n');
  });

  describe('shared page cache: an open of a just-changed path waits out the attribute window', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('a changed path opens only after the window; other paths and warm opens do not wait', async () => {
      vi.useFakeTimers();
      const clock = { now: 0 };
      const changed = new ChangedFiles(1100, () => clock.now);
      const h = harness({ changedFiles: changed });
      h.fs.release(await h.fs.open('/account/runbooks/a.md', 0));
      h.fs.release(await h.fs.open('/account/DUTY.md', 0));
      h.client.put('account/runbooks/a.md', 'ALPHA v2 longer\n');
      h.setTree(Tree.fromPlan(h.client.currentPlan(), h.tree()));
      changed.record(h.tree().changedPaths);
      clock.now = 300;
      let fd: number | undefined;
      void Promise.resolve(h.fs.open('/account/runbooks/a.md', 0)).then((n) => (fd = n));
      expect(typeof h.fs.open('/account/DUTY.md', 0)).toBe('number'); // unchanged: warm, synchronous
      await vi.advanceTimersByTimeAsync(799);
      expect(fd).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(fd).toBeTypeOf('number');
      expect(readAll(h.fs, fd!, 16)).toBe('ALPHA v2 longer\n');
    });
  });

  it('--grant-ttl 0 asks on every open', async () => {
    const h = harness({ grantTtlMs: 0 });
    for (let i = 0; i < 3; i++) h.fs.release(await h.fs.open('/account/DUTY.md', 0));
    expect(h.client.calls.grant).toBe(3);
  });
});
