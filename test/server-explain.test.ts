// GET /v1/admin/explain and `knowledgefs explain` against a real control
// plane with a real (fault-injecting) membership service: a personal session
// across three teams, a team session, a membership outage, and a path in a
// team the creator is not in. Admin only (a runner token is 403), audited
// with action "explain", text for people and JSON for tools.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExplainResponse, ExplainScope } from '../src/core/wire.js';
import { memoryAuditSink } from '../src/server/access/audit-log.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

const FILES = {
  'account/DUTY.md': '# Account\n',
  'teams/payments/DUTY.md': '# Payments\n',
  'teams/payments/runbooks/refunds.md': 'refunds\n',
  'teams/search/DUTY.md': '# Search\n',
  'teams/storage/DUTY.md': '# Storage\n',
  'teams/storage/postmortems/disk-full.md': 'disk full\n',
  'teams/billing/DUTY.md': '# Billing\n',
  'teams/billing/secrets/ledger.md': 'ledger\n',
};

let data = '';
let members: FaultMembership;
let cp: TestControlPlane;
const audit = memoryAuditSink();
let alice: { sessionId: string; token: string };
let bob: { sessionId: string; token: string };

async function explain(query: Record<string, string>, token = cp.adminToken): Promise<{ status: number; body: ExplainResponse & { error?: { code: string; message: string } } }> {
  const res = await fetch(`${cp.url}/v1/admin/explain?${new URLSearchParams(query).toString()}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as ExplainResponse & { error?: { code: string; message: string } } };
}

function scope(e: ExplainResponse, name: string): ExplainScope {
  const s = e.scopes.find((x) => x.scope === name);
  if (s === undefined) throw new Error(`${name} not in ${e.scopes.map((x) => x.scope).join(', ')}`);
  return s;
}

beforeAll(async () => {
  data = await makeDataDir({ teams: { payments: 'Payments', search: 'Search', storage: 'Storage', billing: 'Billing' }, files: FILES });
  members = await startFaultMembership({ alice: ['payments', 'search', 'storage'], bob: ['storage', 'billing'] });
  cp = await startControlPlane({ dataDir: data, membershipUrl: members.url, deps: { audit } });
  alice = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
  bob = await cp.createSession({ kind: 'team', creator: 'bob', team: 'storage' });
  // alice's agent reads search's DUTY.md through the read tool: search is mounted and in her read set.
  const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
  expect(read.status).toBe(200);
});

afterAll(async () => {
  await cp?.close();
  await members?.close();
  if (data) await removeDataDir(data);
});

describe('a personal session across three teams', () => {
  it('shows the memberships, each scope on the three surfaces with the rule, and the read set', async () => {
    const { status, body: e } = await explain({ session: alice.sessionId, threshold: '1' });
    expect(status).toBe(200);
    expect(e.session).toMatchObject({ id: alice.sessionId, kind: 'personal', creator: 'alice', team: 'payments', revoked: false, mounted: ['search'] });
    expect(e.membership).toEqual({ source: 'http', status: 'ok', teams: ['payments', 'search', 'storage'], error: null });
    expect(e.scopes.map((s) => s.scope)).toEqual(['account', 'team_billing', 'team_payments', 'team_search', 'team_storage']);
    // threshold 1 byte: only account, the bound team and mounted teams are on disk.
    expect(e.mode).toBe('bound-and-mounted');
    const row = (name: string) => {
      const s = scope(e, name);
      return [s.advertised, s.materialised, s.loadable, s.decision.rule];
    };
    expect(row('account')).toEqual([true, true, true, 'account']);
    expect(row('team_payments')).toEqual([true, true, true, 'bound-team']);
    expect(row('team_search')).toEqual([true, true, true, 'creator-member']);
    expect(row('team_storage')).toEqual([false, false, true, 'creator-member']);
    expect(row('team_billing')).toEqual([false, false, false, 'creator-not-member']);
    expect(scope(e, 'team_search').mounted).toBe(true);
    expect(scope(e, 'team_billing').decision.why).toBe('creator alice is not a member of team billing (member of payments, search, storage)');
    expect(scope(e, 'team_payments').version).toBe(cp.cp.store.snapshot('team_payments')?.version);
    expect(scope(e, 'team_storage').files).toBe(2);
    expect(e.readSet).toEqual([{ path: 'team_search/DUTY.md', readSha256: expect.any(String), currentSha256: expect.any(String), state: 'unchanged' }]);
  });

  it('materialises every loadable scope when they fit the threshold, and sees a read file change', async () => {
    await writeDataFile(data, 'teams/search/DUTY.md', '# Search, edited\n');
    await cp.rescan();
    const { body: e } = await explain({ session: alice.sessionId });
    expect(e.mode).toBe('all-loadable');
    expect(scope(e, 'team_storage').materialised).toBe(true);
    expect(scope(e, 'team_billing').materialised).toBe(false);
    expect(e.readSet[0]?.state).toBe('changed');
    expect(e.readSet[0]?.currentSha256).not.toBe(e.readSet[0]?.readSha256);
  });

  it('audits every decision it made with action "explain"', async () => {
    await audit.flush();
    const before = audit.records.length;
    const { body: e } = await explain({ session: alice.sessionId });
    const mine = audit.records.slice(before);
    expect(mine.map((r) => r.action)).toEqual(e.scopes.map(() => 'explain'));
    expect(mine.map((r) => r.scope).sort()).toEqual(e.scopes.map((s) => s.scope).sort());
    expect(mine.find((r) => r.scope === 'team_billing')).toMatchObject({ session: alice.sessionId, rule: 'creator-not-member', result: 'deny' });
    // One membership lookup served every decision of the request.
    members.resetCalls();
    await explain({ session: alice.sessionId, path: 'team_storage/DUTY.md' });
    expect(members.calls('alice')).toBe(1);
  });
});

describe('a team session', () => {
  it('allows the account and its team only, and a path in another team reads as the 403 guidance', async () => {
    const { body: e } = await explain({ session: bob.sessionId, path: 'team_billing/secrets/ledger.md' });
    expect(e.session).toMatchObject({ kind: 'team', creator: 'bob', team: 'storage' });
    expect(scope(e, 'account').loadable).toBe(true);
    expect(scope(e, 'team_storage').decision.rule).toBe('bound-team');
    for (const other of ['team_billing', 'team_payments', 'team_search']) {
      expect(scope(e, other).decision).toMatchObject({ allowed: false, rule: 'team-session-other-team', outcome: 'deny' });
    }
    // bob is in billing, which changes nothing for a team session.
    expect(e.membership.teams).toContain('billing');
    expect(e.path).toMatchObject({ path: 'team_billing/secrets/ledger.md', exists: null, materialised: false, readAnswer: { status: 403, code: 'denied' } });
    expect(e.path?.readAnswer.message).toMatch(/belongs to team "storage" and cannot load team "billing"/);
  });
});

describe('a membership outage', () => {
  it('reports the failure, fails closed on other teams, keeps account and the bound team', async () => {
    await members.setMode({ kind: 'status', status: 500 });
    try {
      const { status, body: e } = await explain({ session: alice.sessionId, path: 'team_search/DUTY.md' });
      expect(status).toBe(200);
      expect(e.membership).toMatchObject({ status: 'error', teams: null });
      expect(e.membership.error).toMatch(/HTTP 500/);
      expect(scope(e, 'account').loadable).toBe(true);
      expect(scope(e, 'team_payments').loadable).toBe(true);
      for (const other of ['team_search', 'team_storage', 'team_billing']) {
        expect(scope(e, other).decision).toMatchObject({ allowed: false, rule: 'membership-unavailable', outcome: 'fail_closed' });
      }
      expect(scope(e, 'team_search').materialised).toBe(false);
      expect(e.path?.readAnswer).toMatchObject({ status: 503, code: 'membership_unavailable' });
    } finally {
      await members.setMode({ kind: 'ok' });
    }
  });
});

describe('a path in a denied team', () => {
  it('answers exactly what a read answers, never looking the file up', async () => {
    const { body: e } = await explain({ session: alice.sessionId, path: 'team_billing/secrets/ledger.md' });
    expect(e.path).toMatchObject({ scope: 'team_billing', exists: null, sha256: null, size: null, readAnswer: { status: 404, code: 'not_found' } });
    expect(e.path?.decision).toMatchObject({ rule: 'creator-not-member', outcome: 'deny' });
    // Byte for byte the answer of a read of that path (a hidden denial looks like a missing file).
    const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ path: 'team_billing/secrets/ledger.md' }) });
    expect(read.status).toBe(404);
    expect(((await read.json()) as { error: { message: string } }).error.message).toBe(e.path?.readAnswer.message);
    // An allowed path: the file, its hash, and whether the mount has it.
    const { body: ok } = await explain({ session: alice.sessionId, path: 'team_storage/postmortems/disk-full.md', threshold: '1' });
    expect(ok.path).toMatchObject({ exists: true, size: 10, materialised: false, readAnswer: { status: 200, code: null } });
    const { body: missing } = await explain({ session: alice.sessionId, path: 'team_storage/nope.md' });
    expect(missing.path).toMatchObject({ exists: false, readAnswer: { status: 404, code: 'not_found' } });
  });
});

describe('access and bad input', () => {
  it('is admin only: a runner token is 403, none is 401', async () => {
    expect((await explain({ session: alice.sessionId }, alice.token)).status).toBe(403);
    const res = await fetch(`${cp.url}/v1/admin/explain?session=${alice.sessionId}`);
    expect(res.status).toBe(401);
  });

  it('names what is wrong', async () => {
    expect((await explain({})).body.error).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/session=/) });
    expect((await explain({ session: 's_nope' })).body.error).toMatchObject({ code: 'not_found', message: 'no such session: s_nope' });
    expect((await explain({ session: alice.sessionId, path: '../etc/passwd' })).status).toBe(400);
    expect((await explain({ session: alice.sessionId, threshold: 'lots' })).body.error?.message).toMatch(/threshold/);
  });
});
