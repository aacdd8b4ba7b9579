// The real mount daemon's own reactions, not the sync loop's: with
// --sync-interval 10m and every long-poll answered "unchanged" by a fault
// proxy, nothing but the daemon's wiring can bring a change in.
//   - An open the control plane refuses removes the scope from the tree at
//     once (`ls` drops the team right after the refused `cat`), even while
//     the plan it then asks for hangs.
//   - A file whose bytes no longer match the plan makes the daemon ask for
//     a plan at once (counted at the proxy); that plan brings the new bytes.
//   - With a grant TTL and plans stalled, a revoked team's opens fail once
//     the grant runs out: the bound holds with the control plane up and the
//     sync slow.

import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile, writeDirectory } from './helpers/data-dir.js';
import { startFaultProxy, type FaultProxy, type ProxyRequestRecord } from './helpers/fault-proxy.js';
import { fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const TEAMS = { payments: 'Payments', search: 'Search' };
const ARGS = ['--sync-interval', '10m', '--grant-ttl', '0', '--prefetch-content', 'off'];
const BOUND = 10_000;
/** Above a stated bound: a busy machine's scheduling, the tools' start-up. */
const SLACK_MS = 3_000;

const isPlan = (method: string, url: string) => method === 'GET' && url.startsWith('/v1/plan');
const isLongPoll = (method: string, url: string) => isPlan(method, url) && url.includes('wait=');
/** A plan asked for out of band (not the sync loop's long-poll). */
const isRefresh = (r: ProxyRequestRecord) => isPlan(r.method, r.url) && !r.url.includes('wait=');

let cp: TestControlPlane;
let proxy: FaultProxy;
let dataDir: string;
let m: MountHandle | undefined;

async function mountThroughProxy(refreshes: 'pass' | 'hang', extraArgs: readonly string[] = []): Promise<MountHandle> {
  // Long-polls: "unchanged" at once, so the sync loop sleeps its 10 minutes.
  const unchanged = { match: isLongPoll, mode: { kind: 'status', status: 304, body: '' } } as const;
  proxy.setRules([unchanged]);
  const { token } = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
  m = await startMount({ serverUrl: proxy.url, token, args: [...ARGS, ...extraArgs] });
  // The first plan is not a long-poll and must pass: out-of-band plans hang only from now on.
  if (refreshes === 'hang') proxy.setRules([unchanged, { match: isPlan, mode: { kind: 'hang' } }]);
  return m;
}

fuseSuite('mount daemon wiring (denied opens, stale bytes)', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: TEAMS,
      users: { alice: { teams: ['payments', 'search'] } },
      files: {
        'account/DUTY.md': '# Account\n',
        'account/edited.md': 'before the edit\n',
        'teams/payments/DUTY.md': '# Payments\n',
        'teams/search/runbooks/reindex.md': 'reindex steps\n',
      },
    });
    cp = await startControlPlane({ dataDir });
    proxy = await startFaultProxy(cp.url);
  });

  afterEach(async () => {
    await m?.stop();
    m = undefined;
  });

  afterAll(async () => {
    await proxy?.close();
    await cp?.close();
    await removeDataDir(dataDir);
  });

  it('a membership revoked: the refused cat is ENOENT and ls drops the team at once, while plans hang', async () => {
    const mount = await mountThroughProxy('hang');
    const file = join(mount.mountpoint, 'team_search/runbooks/reindex.md');
    expect((await run('cat', [file])).stdout).toBe('reindex steps\n');
    expect((await run('ls', [mount.mountpoint])).stdout).toBe('account\nteam_payments\nteam_search\n');

    await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments'] } } });
    await cp.rescan();
    proxy.resetCounts();
    const refused = await run('cat', [file]);
    expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: `cat: ${file}: No such file or directory\n`,
    });
    // No plan has come in (long-polls say "unchanged", the refresh hangs): only the refusal removed it.
    expect((await run('ls', [mount.mountpoint])).stdout).toBe('account\nteam_payments\n');
    expect(mount.stderr).toContain('team_search: the control plane refused an open; removed from the mount');
    // …and it asked for a new plan at once.
    expect(await waitFor(() => proxy.count(isRefresh) >= 1, BOUND)).toBe(true);
    expect(proxy.requests.filter(isRefresh).every((r) => r.mode === 'hang')).toBe(true);
    await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments', 'search'] } } });
    await cp.rescan();
  });

  it('bytes newer than the plan: the open fails, one plan is asked for at once, and it brings the new bytes', async () => {
    const mount = await mountThroughProxy('pass');
    const file = join(mount.mountpoint, 'account/edited.md');
    expect((await run('cat', [join(mount.mountpoint, 'account/DUTY.md')])).stdout).toBe('# Account\n');

    await writeDataFile(dataDir, 'account/edited.md', 'after the edit, longer\n');
    await cp.rescan();
    proxy.resetCounts();
    const applied = (mount.stderr.match(/^sync: plan /gm) ?? []).length;
    const stale = await run('cat', [file]);
    expect({ code: stale.code, stdout: stale.stdout, stderr: stale.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: `cat: ${file}: Input/output error\n`,
    });
    expect(await waitFor(() => (mount.stderr.match(/^sync: plan /gm) ?? []).length > applied, BOUND)).toBe(true);
    // One plan, asked for out of band, for the one stale open (the long-polls only ever hear "unchanged").
    expect(proxy.count(isRefresh)).toBe(1);
    expect((await run('cat', [file])).stdout).toBe('after the edit, longer\n');
  });

  it('revocation while plans stall: opens of the revoked team fail within --grant-ttl (control plane up)', async () => {
    const mount = await mountThroughProxy('hang', ['--grant-ttl', '2s']);
    const file = join(mount.mountpoint, 'team_search/runbooks/reindex.md');
    expect((await run('cat', [file])).stdout).toBe('reindex steps\n');
    await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments'] } } });
    await cp.rescan();
    const revokedAt = Date.now();
    try {
      // The grant asked for just before may still be used; past --grant-ttl the next open asks again and is refused.
      expect(await waitFor(async () => (await run('cat', [file])).code !== 0, 2_000 + SLACK_MS)).toBe(true);
      expect(Date.now() - revokedAt).toBeLessThan(2_000 + SLACK_MS);
      expect((await run('cat', [file])).stderr).toBe(`cat: ${file}: No such file or directory\n`);
      expect((await run('ls', [mount.mountpoint])).stdout).toBe('account\nteam_payments\n');
    } finally {
      await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments', 'search'] } } });
      await cp.rescan();
    }
  });
});
