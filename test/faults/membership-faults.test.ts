// The membership source failing under a real mount: down (port closed),
// slow past its timeout, hanging, 500, every kind of garbage body, and
// "unknown user". For a personal session bound to payments whose creator is
// also in search:
//   - account and payments keep working byte for byte (they never depend on
//     membership: an account grant does not even call the service);
//   - search fails closed at once: `cat` gets no byte, even though its
//     content sits in the daemon's cache; the read tool refuses too;
//   - nothing hangs (membership timeout < request timeout, generous bound);
//   - when the service answers again, search comes back without a remount.
// Then a real revocation: the team leaves `ls` and every open within
// grant TTL + sync interval, and the read tool answers exactly like a
// missing file.

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { GARBAGE_BODIES, startFaultMembership, type FaultMembership, type MembershipMode } from '../helpers/fault-membership.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { filesSpec, makeCorpus, type CorpusFile } from './corpus.js';

const NO_HANG_MS = 15_000;

const MODES: readonly [string, MembershipMode][] = [
  ['down (port closed)', { kind: 'down' }],
  ['slow past its timeout', { kind: 'slow', ms: 2500 }],
  ['hanging', { kind: 'hang' }],
  ['HTTP 500', { kind: 'status', status: 500 }],
  ['HTTP 403', { kind: 'status', status: 403 }],
  ...GARBAGE_BODIES.map((body): [string, MembershipMode] => [`garbage ${JSON.stringify(body)}`, { kind: 'garbage', body }]),
  ['unknown user (404)', { kind: 'not-found' }],
  ['200 MB of whitespace before a valid answer', { kind: 'huge', bytes: 200 * 1024 * 1024 }],
];

fuseSuite('membership source faults under a real mount', () => {
  let dir: string;
  let members: FaultMembership;
  let cp: TestControlPlane;
  let mount: MountHandle;
  let corpus: CorpusFile[];
  let token: string;
  const of = (prefix: string) => corpus.filter((c) => c.mountPath.startsWith(prefix));
  const inMount = (f: CorpusFile) => join(mount.mountpoint, f.mountPath);

  beforeAll(async () => {
    corpus = makeCorpus(['account', 'team_payments', 'team_search', 'team_storage'], 4, 200);
    dir = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
      files: filesSpec(corpus),
    });
    members = await startFaultMembership({ alice: ['payments', 'search'], bob: ['payments', 'search'] });
    cp = await startControlPlane({ dataDir: dir, membershipUrl: members.url, membershipTimeoutMs: 500 });
    token = (await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' })).token;
    mount = await startMount({
      serverUrl: cp.url,
      token,
      args: ['--grant-ttl', '0', '--sync-interval', '200ms', '--request-timeout', '3s'],
    });
    // Prefetch fills the cache: the grant, not a missing body, must be what stops a read below.
    expect(await waitFor(async () => (await run('cat', [inMount(of('team_search/')[0] as CorpusFile)])).code === 0, 15_000)).toBe(true);
  });

  afterAll(async () => {
    await mount?.stop();
    await cp?.close();
    await members?.close();
    if (dir) await removeDataDir(dir);
  });

  async function cat(f: CorpusFile) {
    const r = await run('cat', [inMount(f)], { timeoutMs: 60_000 });
    expect(r.timedOut).toBe(false);
    expect(r.ms, `cat ${f.mountPath} took ${r.ms} ms`).toBeLessThan(NO_HANG_MS);
    return r;
  }

  async function ownScopesExact(): Promise<void> {
    for (const f of [...of('account/').slice(0, 2), ...of('team_payments/').slice(0, 2)]) {
      const r = await cat(f);
      expect(r.stdout === f.content, `${f.mountPath}: ${r.stderr}`).toBe(true);
    }
  }

  function kfsRead(path: string) {
    return run(process.execPath, [BIN, 'read', path, '--socket', mount.socketPath], { cwd: mount.dir, timeoutMs: 60_000 });
  }

  it('sanity: with the service up, search is readable through the mount', async () => {
    const f = of('team_search/')[1] as CorpusFile;
    expect((await cat(f)).stdout).toBe(f.content);
    expect(members.calls('alice')).toBeGreaterThan(0);
  });

  it('an account or bound-team grant never consults the membership service', async () => {
    // bob's session has no daemon polling its plan, so every call for bob below comes from these requests.
    const bob = await cp.createSession({ kind: 'personal', creator: 'bob', team: 'payments' });
    const auth = { authorization: `Bearer ${bob.token}` };
    members.resetCalls();
    expect((await fetch(`${cp.url}/v1/grants/account`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${cp.url}/v1/grants/team_payments`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${cp.url}/v1/files/account/DUTY.md`, { headers: auth })).status).toBe(200);
    expect(members.calls('bob')).toBe(0);
    // …while another team does consult it (the counter works).
    expect((await fetch(`${cp.url}/v1/grants/team_search`, { headers: auth })).status).toBe(200);
    expect(members.calls('bob')).toBe(1);
  });

  for (const [label, mode] of MODES) {
    it(`membership ${label}: own scopes exact, search fails closed with no byte, recovers`, async () => {
      const search = of('team_search/');
      await members.setMode(mode);
      try {
        for (const f of search.slice(0, 2)) {
          const r = await cat(f);
          expect(r.code, `${label}: ${f.mountPath} was readable`).not.toBe(0);
          expect(r.stdout, `${label}: content leaked`).toBe('');
          expect(r.stderr).toMatch(/Input\/output error|No such file or directory/);
        }
        const tool = await kfsRead('knowledge/team_search/DUTY.md');
        expect(tool.code, `${label}: read tool`).toBe(mode.kind === 'not-found' ? 1 : 4);
        expect(tool.stdout).toBe('');
        await ownScopesExact();
      } finally {
        await members.setMode({ kind: 'ok' });
      }
      const back = await waitFor(async () => (await run('cat', [inMount(search[2] as CorpusFile)])).stdout === search[2]?.content, 15_000);
      expect(back, `${label}: search did not come back`).toBe(true);
      expect(mount.child.exitCode).toBeNull();
    }, 120_000);
  }

  it('revocation: the team leaves ls and every open within grant TTL + sync interval; the read tool answers like a missing file', async () => {
    members.setTeams('alice', ['payments']);
    try {
      const gone = await waitFor(async () => !(await run('ls', [mount.mountpoint])).stdout.split('\n').includes('team_search'), 10_000);
      expect(gone, 'team_search still listed').toBe(true);
      for (const f of of('team_search/')) {
        const r = await cat(f);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/No such file or directory/);
      }
      const grep = await run('grep', ['-r', 'team_search', '.'], { cwd: mount.mountpoint, timeoutMs: 60_000 });
      expect(grep.stdout).toBe('');
      const denied = await kfsRead('knowledge/team_search/DUTY.md');
      const missing = await kfsRead('knowledge/team_nosuch/DUTY.md');
      expect(denied.code).toBe(1);
      expect(denied.stdout).toBe(missing.stdout);
      expect(denied.stderr.replace('team_search', 'X')).toBe(missing.stderr.replace('team_nosuch', 'X'));
      await ownScopesExact();
    } finally {
      members.setTeams('alice', ['payments', 'search']);
    }
    const back = await waitFor(async () => (await run('ls', [mount.mountpoint])).stdout.split('\n').includes('team_search'), 10_000);
    expect(back).toBe(true);
  }, 120_000);

  it('storage (never a member) stayed invisible through every fault', async () => {
    const ls = await run('ls', [mount.mountpoint]);
    expect(ls.stdout.split('\n')).not.toContain('team_storage');
    const tool = await kfsRead('knowledge/team_storage/DUTY.md');
    expect(tool.code).toBe(1);
    expect(mount.stderr).not.toMatch(/unexpected error|TypeError|Unhandled/);
  });
});
