// Over real HTTP with real directories: the control plane notices changes
// under the data dir by watching it. Every control plane here has its full
// rescans an hour apart, so a change that reaches the plan was rescanned
// because of the watch. With the watch off or failing, the periodic rescan
// (--scan-interval) still finds changes.

import { createHash } from 'node:crypto';
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Plan } from '../src/core/session/plan.js';
import { workForEvent, type WatchFunction } from '../src/server/packs/data-watch.js';
import { DirPackStore } from '../src/store/data-dir/dir-pack-store.js';
import { DEBOUNCE_MS, RescanLoop } from '../src/server/packs/rescan-loop.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const HOUR = 3_600_000;

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', ops: 'Ops' },
  users: { alice: { teams: ['payments', 'search', 'ops'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/runbooks/db.md': 'v1\n',
    'teams/search/DUTY.md': '# Search\n',
  },
};

async function planOf(cp: TestControlPlane, token: string): Promise<Plan> {
  const res = await fetch(`${cp.url}/v1/plan?threshold=1000000000`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as Plan;
}

function files(p: Plan): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of p.scopes) for (const f of s.files) out[`${s.scope}/${f.path}`] = f.sha256;
  return out;
}

/** Polls the plan (no manual rescan) until `check` holds. */
async function eventually(cp: TestControlPlane, token: string, check: (files: Record<string, string>, p: Plan) => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const p = await planOf(cp, token);
    if (check(files(p), p)) return;
    if (Date.now() > deadline) throw new Error(`plan never matched; last: ${JSON.stringify(files(p))}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('rescan timing (fake clock)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a noticed change is rescanned about 50 ms later, not before; later notices do not push it back', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    expect(DEBOUNCE_MS).toBeGreaterThanOrEqual(10);
    expect(DEBOUNCE_MS).toBeLessThanOrEqual(100);
    const scans: string[][] = [];
    const loop = new RescanLoop({ scan: async (work) => void scans.push([...work.packs.keys()].sort()), fullIntervalMs: () => HOUR });
    loop.notice({ full: false, directory: false, layout: false, packs: new Map([['account', new Set([''])]]) });
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS - 10);
    loop.notice({ full: false, directory: false, layout: false, packs: new Map([['team_x', new Set(['runbooks'])]]) });
    await vi.advanceTimersByTimeAsync(9);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual([['account', 'team_x']]);
    await loop.close();
  });
});

describe('watched: changes reach the plan without waiting for the full rescan', () => {
  let dir: string;
  let cp: TestControlPlane;
  let token: string;
  beforeAll(async () => {
    dir = await makeDataDir(spec);
    cp = await startControlPlane({ dataDir: dir, scanIntervalMs: HOUR, watchScanIntervalMs: HOUR });
    token = (await cp.createSession({ kind: 'personal', creator: 'alice' })).token;
    expect(cp.cp.watch?.healthy).toBe(true);
  });
  afterAll(async () => {
    await cp?.close();
    await removeDataDir(dir);
  });

  it('an edit in place', async () => {
    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'v2, edited in place\n');
    await eventually(cp, token, (f) => f['team_payments/runbooks/db.md'] === sha('v2, edited in place\n'));
  });

  it('a rename over a file (write, then rename)', async () => {
    await writeFile(join(dir, 'teams/payments/runbooks/.db.md.tmp'), 'v3, renamed over\n');
    await rename(join(dir, 'teams/payments/runbooks/.db.md.tmp'), join(dir, 'teams/payments/runbooks/db.md'));
    await eventually(cp, token, (f) => f['team_payments/runbooks/db.md'] === sha('v3, renamed over\n') && !('team_payments/runbooks/.db.md.tmp' in f));
  });

  it('an add in new nested directories, then another add in them (the new directories are watched)', async () => {
    await writeDataFile(dir, 'teams/search/a/b/c/deep.md', 'deep\n');
    await eventually(cp, token, (f) => f['team_search/a/b/c/deep.md'] === sha('deep\n'));
    await writeDataFile(dir, 'teams/search/a/b/c/deeper.md', 'deeper\n');
    await eventually(cp, token, (f) => f['team_search/a/b/c/deeper.md'] === sha('deeper\n'));
  });

  it('a delete of a file, and of a whole directory; a directory made again under the same name is watched again', async () => {
    await removeDataFile(dir, 'teams/search/a/b/c/deeper.md');
    await eventually(cp, token, (f) => !('team_search/a/b/c/deeper.md' in f) && 'team_search/a/b/c/deep.md' in f);
    await rm(join(dir, 'teams/search/a'), { recursive: true });
    await eventually(cp, token, (f) => !Object.keys(f).some((k) => k.startsWith('team_search/a/')));
    // Made and written to at once: what the rescan's listing misses, the watch it placed first catches.
    await mkdir(join(dir, 'teams/search/a/b'), { recursive: true });
    await writeDataFile(dir, 'teams/search/a/b/again.md', 'again\n');
    await eventually(cp, token, (f) => f['team_search/a/b/again.md'] === sha('again\n'));
  });

  it('a directory renamed inside its pack, then written to under its new name', async () => {
    await rename(join(dir, 'teams/search/a'), join(dir, 'teams/search/renamed'));
    await eventually(cp, token, (f) => f['team_search/renamed/b/again.md'] === sha('again\n') && !('team_search/a/b/again.md' in f));
    await writeDataFile(dir, 'teams/search/renamed/b/more.md', 'more\n');
    await eventually(cp, token, (f) => f['team_search/renamed/b/more.md'] === sha('more\n'));
  });

  it('a team pack appearing and disappearing', async () => {
    await writeDataFile(dir, 'teams/ops/DUTY.md', '# Ops\n');
    await eventually(cp, token, (f, p) => p.scopes.some((s) => s.scope === 'team_ops') && f['team_ops/DUTY.md'] === sha('# Ops\n'));
    await writeDataFile(dir, 'teams/ops/later/notes.md', 'notes\n');
    await eventually(cp, token, (f) => f['team_ops/later/notes.md'] === sha('notes\n'));
    await rm(join(dir, 'teams/ops'), { recursive: true });
    await eventually(cp, token, (_f, p) => !p.scopes.some((s) => s.scope === 'team_ops'));
  });

  it('a team pack replaced by renaming a new tree over it', async () => {
    await writeDataFile(dir, 'teams/.payments.new/DUTY.md', '# Payments, published\n');
    await rename(join(dir, 'teams/payments'), join(dir, 'teams/.payments.old'));
    await rename(join(dir, 'teams/.payments.new'), join(dir, 'teams/payments'));
    await rm(join(dir, 'teams/.payments.old'), { recursive: true });
    await eventually(cp, token, (f) => f['team_payments/DUTY.md'] === sha('# Payments, published\n') && !('team_payments/runbooks/db.md' in f));
    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'v4, in the new tree\n');
    await eventually(cp, token, (f) => f['team_payments/runbooks/db.md'] === sha('v4, in the new tree\n'));
  });

  it('a directory.json change (written, then renamed over)', async () => {
    const without = JSON.stringify({ teams: { payments: { name: 'Payments' }, search: { name: 'Search' } }, users: { alice: { teams: ['payments'], role: 'member' } } });
    await writeFile(join(dir, '.directory.json.tmp'), without);
    await rename(join(dir, '.directory.json.tmp'), join(dir, 'directory.json'));
    await eventually(cp, token, (_f, p) => !p.scopes.some((s) => s.scope === 'team_search'));
    await writeDirectory(dir, spec);
    await eventually(cp, token, (_f, p) => p.scopes.some((s) => s.scope === 'team_search'));
  });

  it('the account pack disappearing and coming back', async () => {
    await rm(join(dir, 'account'), { recursive: true });
    await eventually(cp, token, (f) => !('account/DUTY.md' in f));
    expect(cp.cp.store.snapshot('account')).toBeUndefined();
    await writeDataFile(dir, 'account/DUTY.md', '# Account, again\n');
    await eventually(cp, token, (f) => f['account/DUTY.md'] === sha('# Account, again\n'));
  });

  it('watches directories only, and none outside the packs; a full rescan places them again', async () => {
    // DATA/, DATA/teams/, and the packs' directories: account, payments(+runbooks), search(+renamed, renamed/b).
    expect(cp.cp.watch?.size).toBe(2 + 1 + 2 + 3);
    await cp.rescan();
    expect(cp.cp.watch?.size).toBe(2 + 1 + 2 + 3);
    await writeDataFile(dir, 'teams/search/renamed/b/after-renew.md', 'renewed\n');
    await eventually(cp, token, (f) => f['team_search/renamed/b/after-renew.md'] === sha('renewed\n'));
    expect(cp.logs.filter((l) => /watch/.test(l))).toEqual([]);
  });
});

describe('what an event asks to rescan', () => {
  const root = '/data';
  it('maps events to directory.json, the set of packs, or one directory of a pack and what is below it', () => {
    expect(workForEvent(root, root, null, 'directory.json')).toMatchObject({ full: false, directory: true, layout: false });
    expect(workForEvent(root, root, null, '.knowledgefs')).toMatchObject({ full: false, directory: false, layout: false, packs: new Map() });
    expect(workForEvent(root, root, null, 'teams').full).toBe(true);
    expect(workForEvent(root, root, null, null).full).toBe(true);
    expect(workForEvent(root, root, null, 'account')).toMatchObject({ full: false, layout: true, packs: new Map([['account', new Set([''])]]) });
    expect(workForEvent(root, '/data/teams', null, 'payments')).toMatchObject({ full: false, layout: true, packs: new Map([['team_payments', new Set([''])]]) });
    expect(workForEvent(root, '/data/teams', null, 'Not_A_Team')).toMatchObject({ full: false, layout: true, packs: new Map() });
    expect(workForEvent(root, '/data/teams/search', 'team_search', 'y.md')).toMatchObject({ full: false, directory: false, packs: new Map([['team_search', new Set([''])]]) });
    expect(workForEvent(root, '/data/teams/search/x/y', 'team_search', 'z.md')).toMatchObject({ full: false, directory: false, packs: new Map([['team_search', new Set(['x/y'])]]) });
  });
});

describe('rescanning one directory of a pack', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await makeDataDir(spec);
    await writeDataFile(dir, 'teams/payments/runbooks/deep/x.md', 'x\n');
    await writeDataFile(dir, 'outside/secret.md', 'secret\n');
    await writeDataFile(dir, 'outside/deep/leak.md', 'leak\n');
  });
  afterAll(async () => {
    await removeDataDir(dir);
  });
  const paths = (store: DirPackStore) => (store.snapshot('team_payments')?.files ?? []).map((f) => f.path).sort();

  it('keeps the files outside it, and sees adds, deletes and edits below it', async () => {
    const store = new DirPackStore(dir, { maxFileSize: 1 << 20, log: () => {} });
    await store.scan();
    await writeDataFile(dir, 'teams/payments/DUTY.md', '# not rescanned yet\n');
    await writeDataFile(dir, 'teams/payments/runbooks/deep/new.md', 'new\n');
    await removeDataFile(dir, 'teams/payments/runbooks/db.md');
    await store.scan(new Map([['team_payments', new Set(['runbooks'])]]));
    expect(paths(store)).toEqual(['DUTY.md', 'runbooks/deep/new.md', 'runbooks/deep/x.md']);
    expect(store.snapshot('team_payments')?.files.find((f) => f.path === 'DUTY.md')?.sha256).toBe(sha('# Payments\n'));
    await store.scan(new Map([['team_payments', new Set([''])]]));
    expect(store.snapshot('team_payments')?.files.find((f) => f.path === 'DUTY.md')?.sha256).toBe(sha('# not rescanned yet\n'));
  });

  it('a directory swapped for a symlink is not followed: the whole pack is walked instead', async () => {
    const store = new DirPackStore(dir, { maxFileSize: 1 << 20, log: () => {} });
    await store.scan();
    await rm(join(dir, 'teams/payments/runbooks'), { recursive: true });
    await symlink(join(dir, 'outside'), join(dir, 'teams/payments/runbooks'));
    await store.scan(new Map([['team_payments', new Set(['runbooks/deep'])]]));
    expect(paths(store)).toEqual(['DUTY.md']);
    await rm(join(dir, 'teams/payments/runbooks'));
    await mkdir(join(dir, 'teams/payments/runbooks/deep'), { recursive: true });
    await symlink(join(dir, 'outside'), join(dir, 'teams/payments/runbooks/deep/inner'));
    await store.scan(new Map([['team_payments', new Set(['runbooks/deep/inner'])]]));
    expect(paths(store)).toEqual(['DUTY.md']);
  });
});

describe('without a working watch, the periodic rescan finds changes', () => {
  let dir: string;
  let cp: TestControlPlane | null = null;
  beforeAll(async () => {
    dir = await makeDataDir(spec);
  });
  afterEach(async () => {
    await cp?.close();
    cp = null;
  });
  afterAll(async () => {
    await removeDataDir(dir);
  });

  it('--watch off: rescans every --scan-interval', async () => {
    cp = await startControlPlane({ dataDir: dir, watch: false, scanIntervalMs: 100, watchScanIntervalMs: HOUR });
    expect(cp.cp.watch).toBeNull();
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    await writeDataFile(dir, 'teams/search/off/new.md', 'watch off\n');
    await eventually(cp, token, (f) => f['team_search/off/new.md'] === sha('watch off\n'));
  });

  it('a watch that cannot be placed (inotify limit): one log line, then rescans every --scan-interval', async () => {
    const full: WatchFunction = () => {
      throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' });
    };
    cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 100, watchScanIntervalMs: HOUR, deps: { watch: full } });
    expect(cp.cp.watch?.healthy).toBe(false);
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    await writeDataFile(dir, 'teams/search/limit/new.md', 'watch limit\n');
    await eventually(cp, token, (f) => f['team_search/limit/new.md'] === sha('watch limit\n'));
    const lines = cp.logs.filter((l) => l.startsWith('watching '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/stopped: cannot watch .*: the inotify watch limit is reached \(sysctl fs\.inotify\.max_user_watches\); rescanning everything every 100ms \(--scan-interval\) instead/);
  });

  it('a watch that errors later: one log line, every watch closed, then rescans every --scan-interval', async () => {
    const watchers: FSWatcher[] = [];
    const real: WatchFunction = (d, listener) => {
      const w = fsWatch(d, { persistent: false }, (event, name) => listener(event, name));
      watchers.push(w);
      return w;
    };
    cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 100, watchScanIntervalMs: HOUR, deps: { watch: real } });
    expect(cp.cp.watch?.healthy).toBe(true);
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    watchers[0]?.emit('error', Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }));
    watchers[1]?.emit('error', Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }));
    expect(cp.cp.watch?.healthy).toBe(false);
    expect(cp.cp.watch?.size).toBe(0);
    await writeDataFile(dir, 'teams/search/broken/new.md', 'watch broken\n');
    await eventually(cp, token, (f) => f['team_search/broken/new.md'] === sha('watch broken\n'));
    expect(cp.logs.filter((l) => l.startsWith('watching '))).toEqual([expect.stringMatching(/stopped: watch of .* failed: EIO: i\/o error; rescanning everything every 100ms/)]);
  });
});
