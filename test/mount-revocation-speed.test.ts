// Revocation at warm speed, on a real mount with the default flags (no
// --grant-ttl, no --sync-interval): files already opened, cached by the kernel
// and (on the native binding) answered by the addon's fast path stop opening
// within 1 s of the control plane knowing that
// - their creator left the team (directory.json rescanned),
// - the session was revoked (deleted),
// and within --membership-recheck + 1 s of a membership service
// (--membership-url) dropping the team. The control plane wakes the daemon's
// plan long-poll; the tree swap drops the scope's grant and its nodes from
// the fast path. Polled every 20 ms; the bound is asserted on the time taken.

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDirectory } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';
import { fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const TEAMS = { payments: 'Payments', search: 'Search' };
const BOTH = { teams: TEAMS, users: { alice: { teams: ['payments', 'search'] } } };
const ONLY_PAYMENTS = { teams: TEAMS, users: { alice: { teams: ['payments'] } } };
/** The promise: 1 s from the control plane knowing (plus the membership re-check where a service decides). */
const BOUND_MS = 1_000;
const RECHECK_MS = 2_000; // --membership-recheck's default
const POLL_MS = 20;

let dataDir: string;
const mounts: MountHandle[] = [];
const planes: TestControlPlane[] = [];

const cat = (path: string) => run('cat', [path]);

async function mountAt(cp: TestControlPlane, kind: 'personal' | 'team' = 'personal'): Promise<{ m: MountHandle; sessionId: string }> {
  const { token, sessionId } = await cp.createSession({ kind, creator: 'alice', team: 'payments' });
  const m = await startMount({ serverUrl: cp.url, token });
  mounts.push(m);
  return { m, sessionId };
}

/** Opens the file a few times (warm: kernel pages and, on native, the fast path), then checks it still opens. */
async function warm(file: string, content: string): Promise<void> {
  for (let i = 0; i < 3; i++) expect((await cat(file)).stdout).toBe(content);
}

/** Milliseconds from now until `cat file` fails (polled), or throws after `ms`. */
async function msUntilRefused(file: string, ms: number): Promise<number> {
  const t0 = Date.now();
  await waitFor(async () => (await cat(file)).code !== 0, ms, POLL_MS);
  return Date.now() - t0;
}

fuseSuite('revocation at warm speed (default flags)', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      ...BOTH,
      files: {
        'account/DUTY.md': '# Account\n',
        'teams/payments/DUTY.md': '# Payments\n',
        'teams/search/DUTY.md': '# Search\n',
        'teams/search/runbooks/reindex.md': 'reindex steps\n',
      },
    });
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    for (const cp of planes) await cp.close();
    await removeDataDir(dataDir);
  });

  it('creator removed from a team: opens of its cached files fail within 1 s of the rescan; the others keep opening', async () => {
    const cp = await startControlPlane({ dataDir, scanIntervalMs: 3_600_000 });
    planes.push(cp);
    const { m } = await mountAt(cp);
    const file = join(m.mountpoint, 'team_search/runbooks/reindex.md');
    await warm(file, 'reindex steps\n');
    try {
      await writeDirectory(dataDir, ONLY_PAYMENTS);
      await cp.rescan();
      const ms = await msUntilRefused(file, 10_000);
      expect(ms).toBeLessThan(BOUND_MS);
      expect((await cat(file)).stderr).toBe(`cat: ${file}: No such file or directory\n`);
      expect((await cat(join(m.mountpoint, 'team_payments/DUTY.md'))).stdout).toBe('# Payments\n');
    } finally {
      await writeDirectory(dataDir, BOTH);
      await cp.rescan();
    }
  });

  it('a revoked session: opens of cached files fail within 1 s of the revocation', async () => {
    const cp = await startControlPlane({ dataDir });
    planes.push(cp);
    const { m, sessionId } = await mountAt(cp, 'team');
    const file = join(m.mountpoint, 'account/DUTY.md');
    await warm(file, '# Account\n');
    const res = await fetch(`${cp.url}/v1/admin/sessions/${sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${cp.adminToken}` } });
    expect(res.status).toBe(204);
    const ms = await msUntilRefused(file, 10_000);
    expect(ms).toBeLessThan(BOUND_MS);
  });

  it('a membership service drops the team: opens of its cached files fail within --membership-recheck + 1 s', async () => {
    let members: FaultMembership | undefined;
    try {
      members = await startFaultMembership({ alice: ['payments', 'search'] });
      const cp = await startControlPlane({ dataDir, membershipUrl: members.url });
      planes.push(cp);
      const { m } = await mountAt(cp);
      const file = join(m.mountpoint, 'team_search/DUTY.md');
      await warm(file, '# Search\n');
      members.setTeams('alice', ['payments']);
      const ms = await msUntilRefused(file, 20_000);
      expect(ms).toBeLessThan(RECHECK_MS + BOUND_MS);
      expect((await cat(join(m.mountpoint, 'team_payments/DUTY.md'))).stdout).toBe('# Payments\n');
    } finally {
      await members?.close();
    }
  });
});
