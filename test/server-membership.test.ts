// Membership from an HTTP service (--membership-url) over real HTTP: when the
// service is down, slow, hanging, answering 500 or garbage, or does not know
// the creator, other teams are denied (fail closed) while the account and the
// bound team keep working and never consult the service.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Plan } from '../src/core/session/plan.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { httpMembership } from '../src/server/access/membership.js';
import { BIN, run } from './helpers/mount.js';
import { GARBAGE_BODIES, startFaultMembership, type FaultMembership, type MembershipMode } from './helpers/fault-membership.js';

let dir: string;
let members: FaultMembership;
let cp: TestControlPlane;

beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search' },
    users: {},
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/search/DUTY.md': '# Search\n',
    },
  });
  members = await startFaultMembership({ alice: ['payments', 'search'] });
  cp = await startControlPlane({ dataDir: dir, membershipUrl: members.url, membershipTimeoutMs: 300 });
});
afterAll(async () => {
  await cp?.close();
  await members?.close();
  await removeDataDir(dir);
});
beforeEach(async () => {
  await members.setMode({ kind: 'ok' });
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const status = async (token: string, path: string) => (await fetch(`${cp.url}${path}`, { headers: auth(token) })).status;
const planScopes = async (token: string) =>
  ((await (await fetch(`${cp.url}/v1/plan`, { headers: auth(token) })).json()) as Plan).scopes.map((s) => s.scope);

const failures: [string, MembershipMode][] = [
  ['down', { kind: 'down' }],
  ['slow (past the timeout)', { kind: 'slow', ms: 2_000 }],
  ['hanging', { kind: 'hang' }],
  ['500', { kind: 'status', status: 500 }],
  ['403', { kind: 'status', status: 403 }],
  ...GARBAGE_BODIES.map((body): [string, MembershipMode] => [`garbage ${JSON.stringify(body)}`, { kind: 'garbage', body }]),
];

describe('HTTP membership source', () => {
  it('works when the service answers: member teams allowed, creator asked about', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    members.resetCalls();
    expect(await status(s.token, '/v1/files/team_search/DUTY.md')).toBe(200);
    expect(members.calls('alice')).toBe(1);
    expect(await planScopes(s.token)).toEqual(['account', 'team_payments', 'team_search']);
  });

  it.each(failures)('service %s → other teams fail closed (503), account and bound team still allowed', async (_name, mode) => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await members.setMode(mode);
    const res = await fetch(`${cp.url}/v1/files/team_search/DUTY.md`, { headers: auth(s.token) });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: 'membership_unavailable' } });
    expect(await status(s.token, '/v1/grants/team_search')).toBe(503);
    members.resetCalls();
    expect(await status(s.token, '/v1/files/account/DUTY.md')).toBe(200);
    expect(await status(s.token, '/v1/files/team_payments/DUTY.md')).toBe(200);
    expect(members.calls()).toBe(0);
    expect(await planScopes(s.token)).toEqual(['account', 'team_payments']);
  });

  it('a creator the service does not know (404) is denied other teams like a missing file', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await members.setMode({ kind: 'not-found' });
    expect(await status(s.token, '/v1/files/team_search/DUTY.md')).toBe(404);
    expect(await status(s.token, '/v1/files/team_payments/DUTY.md')).toBe(200);
  });

  it('a membership removed at the service takes effect on the next request', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect(await status(s.token, '/v1/files/team_search/DUTY.md')).toBe(200);
    members.setTeams('alice', ['payments']);
    try {
      expect(await status(s.token, '/v1/files/team_search/DUTY.md')).toBe(404);
    } finally {
      members.setTeams('alice', ['payments', 'search']);
    }
  });

  it('team sessions never consult the service', async () => {
    const t = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    await members.setMode({ kind: 'down' });
    members.resetCalls();
    expect(await status(t.token, '/v1/files/team_search/DUTY.md')).toBe(403);
    expect(await status(t.token, '/v1/files/team_payments/DUTY.md')).toBe(200);
    expect(members.calls()).toBe(0);
  });

  it('session create: unknown user is 400, service down is 503', async () => {
    const create = (creator: string) =>
      fetch(`${cp.url}/v1/admin/sessions`, { method: 'POST', headers: auth(cp.adminToken), body: JSON.stringify({ kind: 'personal', creator }) });
    expect((await create('nobody')).status).toBe(400);
    await members.setMode({ kind: 'down' });
    const res = await create('alice');
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: 'membership_unavailable' } });
  });
});

describe('a membership outage and the read set', () => {
  const reminder = async (token: string) =>
    (await (await fetch(`${cp.url}/v1/reminder?today=2025-01-02`, { headers: auth(token) })).json()) as { changed: string[]; deleted: string[]; text: string };

  it.each(failures.slice(0, 4))('service %s: a read file is not reported deleted nor dropped; a real edit is reported once it is back', async (_name, mode) => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
    expect(read.status).toBe(200);
    await members.setMode(mode);
    const during = await reminder(s.token);
    expect(during.deleted).toEqual([]);
    expect(during.changed).toEqual([]);
    expect(during.text).not.toContain('team_search');
    await members.setMode({ kind: 'ok' });
    expect(await reminder(s.token)).toMatchObject({ changed: [], deleted: [] });
    await writeDataFile(dir, 'teams/search/DUTY.md', `# Search, edited during ${_name}\n`);
    await cp.rescan();
    const after = await reminder(s.token);
    expect(after.changed).toEqual(['team_search/DUTY.md']);
    expect(after.text).toContain('knowledge/team_search/DUTY.md');
  });

  it('a real revocation (no longer a member) is still reported as can no longer be loaded', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) })).status).toBe(200);
    members.setTeams('alice', ['payments']);
    try {
      expect((await reminder(s.token)).deleted).toEqual(['team_search/DUTY.md']);
    } finally {
      members.setTeams('alice', ['payments', 'search']);
    }
  });
});

describe('user names that would rewrite the lookup path', () => {
  const BAD_NAMES = ['.', '..', '%2e%2e', '%2E%2E', 'a/b', 'a%2fb', '../teams', 'a\\b', 'tab\tname', 'nul\u0000', 'del\u007f', 'c1\u0085', 'line\nbreak', ''];
  const LOOKUP = /^\/users\/[^/]+\/teams$/;
  const create = (creator: string) =>
    fetch(`${cp.url}/v1/admin/sessions`, { method: 'POST', headers: auth(cp.adminToken), body: JSON.stringify({ kind: 'personal', creator }) });

  it.each(BAD_NAMES.map((n) => [JSON.stringify(n), n]))('session create refuses creator %s with a 400 naming "creator", and asks the service nothing', async (_shown, name) => {
    members.resetCalls();
    const res = await create(name);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_argument');
    expect(body.error.message).toMatch(/"creator"/);
    expect(members.paths()).toEqual([]);
  });

  it('names with dots inside, "@" or non-ASCII letters are still names: looked up as /users/<name>/teams', async () => {
    members.resetCalls();
    for (const name of ['a.b', '...', 'alice@example.com', 'zoë']) expect((await create(name)).status).toBe(400); // unknown user, asked
    expect(members.paths()).toHaveLength(4);
    for (const path of members.paths()) expect(path).toMatch(LOOKUP);
  });

  it('`knowledgefs session create --creator ..` is refused, naming --creator, and no session is created', async () => {
    members.resetCalls();
    for (const name of ['..', 'a/b', '%2e%2e']) {
      const r = await run(process.execPath, [BIN, 'session', 'create', '--server', cp.url, '--kind', 'personal', '--creator', name, '--json'], {
        env: { KNOWLEDGEFS_ADMIN_TOKEN: cp.adminToken },
        timeoutMs: 30_000,
      });
      expect(r.code, r.stdout).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/--creator/);
    }
    expect(members.paths()).toEqual([]);
  });

  it('the membership client refuses them too (fail closed), without a request; good names go to /users/<name>/teams only', async () => {
    members.resetCalls();
    const client = httpMembership(members.url, 1_000);
    for (const name of BAD_NAMES) {
      const answer = await client.teamsOf(name);
      expect(answer.status, JSON.stringify(name)).toBe('error');
    }
    expect(members.paths()).toEqual([]);
    expect(await client.teamsOf('alice')).toEqual({ status: 'ok', teams: ['payments', 'search'] });
    expect(members.paths()).toEqual(['/users/alice/teams']);
  });
});
