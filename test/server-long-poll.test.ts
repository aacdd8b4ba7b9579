// Plan long-polls over real HTTP: woken by real changes (a scan that changed
// something, a mount, a revocation) rather than a timer; the membership
// service asked at most once per --membership-recheck per long-poll; at most
// --max-long-polls per session (429 beyond). The membership service is a
// real HTTP service that counts its calls.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plan } from '../src/core/session/plan.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { longPollsWaiting, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

let dir: string;
let members: FaultMembership;
const planes: TestControlPlane[] = [];

beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
    users: {},
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/search/DUTY.md': '# Search\n',
      'teams/storage/DUTY.md': '# Storage\n',
    },
  });
  members = await startFaultMembership({ alice: ['payments', 'search'] });
});
afterAll(async () => {
  for (const cp of planes) await cp.close();
  await members?.close();
  await removeDataDir(dir);
});

async function plane(options: { membershipRecheckMs?: number; maxLongPollsPerSession?: number } = {}): Promise<TestControlPlane> {
  const cp = await startControlPlane({ dataDir: dir, membershipUrl: members.url, scanIntervalMs: 60_000, ...options });
  planes.push(cp);
  return cp;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function etagOf(cp: TestControlPlane, token: string): Promise<string> {
  return (await fetch(`${cp.url}/v1/plan`, { headers: auth(token) })).headers.get('etag') as string;
}

function longPoll(cp: TestControlPlane, token: string, etag: string, wait: number) {
  const started = Date.now();
  return fetch(`${cp.url}/v1/plan?wait=${wait}`, { headers: { ...auth(token), 'if-none-match': etag } }).then(async (res) => ({
    status: res.status,
    ms: Date.now() - started,
    retryAfter: res.headers.get('retry-after'),
    body: res.status === 200 ? ((await res.json()) as Plan) : res.status === 304 ? null : ((await res.json()) as { error: { code: string; message: string } }),
  }));
}

describe('plan long-polls and the membership service', () => {
  it('one wait=5 asks the membership service at most 1 + ceil(5 s / --membership-recheck 2 s) times', async () => {
    const cp = await plane();
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const etag = await etagOf(cp, s.token);
    members.resetCalls();
    const r = await longPoll(cp, s.token, etag, 5);
    expect(r.status).toBe(304);
    expect(members.calls('alice')).toBeGreaterThanOrEqual(1);
    expect(members.calls('alice')).toBeLessThanOrEqual(4);
  });

  it('changes to packs outside the plan wake it, but do not ask the service again before the re-check', async () => {
    const cp = await plane({ membershipRecheckMs: 60_000 });
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const etag = await etagOf(cp, s.token);
    members.resetCalls();
    const poll = longPoll(cp, s.token, etag, 3);
    for (let i = 0; i < 5; i++) {
      await writeDataFile(dir, 'teams/storage/DUTY.md', `# Storage ${i}\n`);
      await cp.rescan();
    }
    expect((await poll).status).toBe(304);
    expect(members.calls('alice')).toBe(1);
  });

  it('a revoked membership reaches a waiting plan within --membership-recheck', async () => {
    const cp = await plane({ membershipRecheckMs: 300 });
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const etag = await etagOf(cp, s.token);
    const poll = longPoll(cp, s.token, etag, 30);
    await longPollsWaiting(cp, 1);
    members.setTeams('alice', ['payments']);
    try {
      const r = await poll;
      expect(r.status).toBe(200);
      expect((r.body as Plan).scopes.map((x) => x.scope)).toEqual(['account', 'team_payments']);
      expect(r.ms).toBeLessThan(20_000); // not the 30 s wait
    } finally {
      members.setTeams('alice', ['payments', 'search']);
    }
  });
});

describe('plan long-polls wake on real changes', () => {
  it('a changed file in the plan answers a wait=30 long-poll with the new plan (re-check an hour away)', async () => {
    const cp = await plane({ membershipRecheckMs: 3_600_000 });
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const etag = await etagOf(cp, s.token);
    const poll = longPoll(cp, s.token, etag, 30);
    await longPollsWaiting(cp, 1);
    await writeDataFile(dir, 'teams/payments/new.md', 'new\n');
    await cp.rescan();
    const r = await poll;
    expect(r.status).toBe(200);
    expect((r.body as Plan).scopes.find((x) => x.scope === 'team_payments')?.files.map((f) => f.path)).toContain('new.md');
  });

  it('a mount by the read tool answers the same session\'s waiting long-poll', async () => {
    const cp = await plane({ membershipRecheckMs: 3_600_000 });
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    // Over the threshold: only account, bound team and mounted teams are in the plan.
    const etag = (await fetch(`${cp.url}/v1/plan?threshold=1`, { headers: auth(s.token) })).headers.get('etag') as string;
    const poll = fetch(`${cp.url}/v1/plan?threshold=1&wait=30`, { headers: { ...auth(s.token), 'if-none-match': etag } });
    await longPollsWaiting(cp, 1);
    const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
    expect(read.status).toBe(200);
    const res = await poll;
    expect(res.status).toBe(200);
    expect(((await res.json()) as Plan).mounted).toEqual(['search']);
  });

  it('revoking the session ends its waiting long-poll with 401', async () => {
    const cp = await plane({ membershipRecheckMs: 3_600_000 });
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const etag = await etagOf(cp, s.token);
    const poll = longPoll(cp, s.token, etag, 30);
    await longPollsWaiting(cp, 1);
    const del = await fetch(`${cp.url}/v1/admin/sessions/${s.sessionId}`, { method: 'DELETE', headers: auth(cp.adminToken) });
    expect(del.status).toBe(204);
    const r = await poll;
    expect(r.status).toBe(401);
    expect(r.ms).toBeLessThan(20_000); // not the 30 s wait
  });
});

describe('long-polls per session', () => {
  it('beyond --max-long-polls: 429 with Retry-After, naming the limit; other sessions unaffected; a slot frees when one ends', async () => {
    const cp = await plane({ maxLongPollsPerSession: 2 });
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const t = await cp.createSession({ kind: 'team', creator: 'alice', team: 'search' });
    const etag = await etagOf(cp, s.token);
    const held = [longPoll(cp, s.token, etag, 2), longPoll(cp, s.token, etag, 2)];
    await longPollsWaiting(cp, 2);
    const third = await longPoll(cp, s.token, etag, 2);
    expect(third.status).toBe(429);
    expect(third.retryAfter).toBe('1');
    expect(third.body).toEqual({ error: { code: 'unavailable', message: expect.stringContaining('already holds 2 plan long-polls (--max-long-polls)') } });
    // A plain plan request (no wait) is never refused.
    expect((await fetch(`${cp.url}/v1/plan`, { headers: auth(s.token) })).status).toBe(200);
    expect((await longPoll(cp, t.token, await etagOf(cp, t.token), 0.2)).status).toBe(304);
    for (const r of await Promise.all(held)) expect(r.status).toBe(304);
    expect((await longPoll(cp, s.token, etag, 0.2)).status).toBe(304);
  });
});
