// GET /v1/admin/explain answered whole, field by field, on an in-process
// control plane: each rule's sentence, the scopes in their order (account
// first, then by name) with their sizes and surfaces, every read-set state,
// what a read of the asked path would answer, the membership as the source
// answered it, and the decision log's last decisions (or why it could not be
// read). server-explain.test.ts runs it against a real membership service
// and the CLI.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExplainResponse } from '../src/core/wire.js';
import type { AuditRecord, AuditSink } from '../src/server/access/audit-log.js';
import type { MembershipSource } from '../src/server/access/membership.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile } from './helpers/data-dir.js';

const FILES = {
  'account/DUTY.md': '# Account\n',
  'teams/payments/DUTY.md': '# Payments\n',
  'teams/payments/runbooks/refunds.md': 'refunds v1\n',
  'teams/payments/runbooks/old.md': 'old\n',
  'teams/search/DUTY.md': '# Search\n',
  'teams/storage/DUTY.md': '# Storage\n',
  'teams/billing/DUTY.md': '# Billing\n',
};
const bytes = (...paths: (keyof typeof FILES)[]) => paths.reduce((n, p) => n + Buffer.byteLength(FILES[p]), 0);

let data = '';
let cp: TestControlPlane;
/** What the membership source answers (directory.json when null). */
let override: ((user: string) => ReturnType<MembershipSource['teamsOf']>) | null = null;
let recent: AuditSink['recent'];
const records: AuditRecord[] = [];

async function explain(query: Record<string, string>): Promise<{ status: number; body: ExplainResponse & { error?: { code: string; message: string } } }> {
  const res = await fetch(`${cp.url}/v1/admin/explain?${new URLSearchParams(query).toString()}`, { headers: { authorization: `Bearer ${cp.adminToken}` } });
  return { status: res.status, body: (await res.json()) as ExplainResponse & { error?: { code: string; message: string } } };
}

async function read(token: string, path: string, mount = false): Promise<void> {
  const res = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ path, mount }) });
  expect(res.status, await res.text()).toBe(200);
}

const version = expect.stringMatching(/\S/);
const sha = expect.stringMatching(/^[0-9a-f]{64}$/);

beforeAll(async () => {
  data = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search', storage: 'Storage', billing: 'Billing' },
    users: { alice: { teams: ['payments', 'search'] }, bob: { teams: ['storage'] }, carol: { teams: [] } },
    files: FILES,
  });
  cp = await startControlPlane({
    dataDir: data,
    deps: {
      audit: {
        append: (r) => void records.push(r),
        flush: async () => undefined,
        reopen: async () => undefined,
        close: async () => undefined,
        get recent() {
          return recent;
        },
      },
      wrapMembership: (inner) => ({ teamsOf: (user) => (override ? override(user) : inner.teamsOf(user)) }),
    },
  });
});

afterAll(async () => {
  await cp?.close();
  if (data) await removeDataDir(data);
});

describe('a personal session', () => {
  it('explains every scope, every read-set state and the asked path, whole', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await read(alice.token, 'team_payments/runbooks/refunds.md');
    await read(alice.token, 'team_payments/runbooks/old.md');
    await read(alice.token, 'team_payments/DUTY.md');
    await read(alice.token, 'team_search/DUTY.md', true);
    await writeDataFile(data, 'teams/payments/runbooks/refunds.md', 'refunds v2\n');
    await removeDataFile(data, 'teams/payments/runbooks/old.md');
    await cp.rescan();
    try {
      const { status, body } = await explain({ session: alice.sessionId, path: 'team_payments/runbooks/refunds.md', threshold: '1000000' });
      expect(status).toBe(200);
      const payments = bytes('teams/payments/DUTY.md') + Buffer.byteLength('refunds v2\n');
      expect(body).toEqual({
        session: { id: alice.sessionId, kind: 'personal', creator: 'alice', team: 'payments', revoked: false, createdAt: expect.any(String), mounted: ['search'] },
        membership: { source: 'directory', status: 'ok', teams: ['payments', 'search'], error: null },
        threshold: 1000000,
        mode: 'all-loadable',
        loadableBytes: bytes('account/DUTY.md', 'teams/search/DUTY.md') + payments,
        scopes: [
          { scope: 'account', version, files: 1, totalBytes: bytes('account/DUTY.md'), advertised: true, materialised: true, loadable: true, mounted: false, decision: { allowed: true, rule: 'account', outcome: 'allow', why: 'the account scope is open to every session' } },
          { scope: 'team_billing', version, files: 1, totalBytes: bytes('teams/billing/DUTY.md'), advertised: false, materialised: false, loadable: false, mounted: false, decision: { allowed: false, rule: 'creator-not-member', outcome: 'deny', why: 'creator alice is not a member of team billing (member of payments, search)' } },
          { scope: 'team_payments', version, files: 2, totalBytes: payments, advertised: true, materialised: true, loadable: true, mounted: false, decision: { allowed: true, rule: 'bound-team', outcome: 'allow', why: 'the session is bound to team payments' } },
          { scope: 'team_search', version, files: 1, totalBytes: bytes('teams/search/DUTY.md'), advertised: true, materialised: true, loadable: true, mounted: true, decision: { allowed: true, rule: 'creator-member', outcome: 'allow', why: 'creator alice is a member of team search now' } },
          { scope: 'team_storage', version, files: 1, totalBytes: bytes('teams/storage/DUTY.md'), advertised: false, materialised: false, loadable: false, mounted: false, decision: { allowed: false, rule: 'creator-not-member', outcome: 'deny', why: 'creator alice is not a member of team storage (member of payments, search)' } },
        ],
        readSet: [
          { path: 'team_payments/runbooks/refunds.md', readSha256: sha, currentSha256: sha, state: 'changed' },
          { path: 'team_payments/runbooks/old.md', readSha256: sha, currentSha256: null, state: 'deleted' },
          { path: 'team_payments/DUTY.md', readSha256: sha, currentSha256: sha, state: 'unchanged' },
          { path: 'team_search/DUTY.md', readSha256: sha, currentSha256: sha, state: 'unchanged' },
        ],
        path: {
          path: 'team_payments/runbooks/refunds.md',
          scope: 'team_payments',
          decision: { allowed: true, rule: 'bound-team', outcome: 'allow', why: 'the session is bound to team payments' },
          exists: true,
          sha256: sha,
          size: Buffer.byteLength('refunds v2\n'),
          materialised: true,
          readAnswer: { status: 200, code: null, message: null },
        },
      });
      const [changed, , unchanged] = body.readSet;
      expect(changed?.currentSha256).not.toBe(changed?.readSha256);
      expect(unchanged?.currentSha256).toBe(unchanged?.readSha256);
      expect(body.path?.sha256).toBe(changed?.currentSha256);
    } finally {
      await writeDataFile(data, 'teams/payments/runbooks/refunds.md', FILES['teams/payments/runbooks/refunds.md']);
      await writeDataFile(data, 'teams/payments/runbooks/old.md', FILES['teams/payments/runbooks/old.md']);
      await cp.rescan();
    }
  });

  it('materialises only account, bound and mounted teams past the threshold; a missing file reads as 404', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const { body } = await explain({ session: alice.sessionId, path: 'team_search/nothing.md', threshold: '1' });
    expect(body.mode).toBe('bound-and-mounted');
    expect(body.scopes.map((s) => [s.scope, s.advertised, s.materialised, s.loadable])).toEqual([
      ['account', true, true, true],
      ['team_billing', false, false, false],
      ['team_payments', false, false, true],
      ['team_search', false, false, true],
      ['team_storage', false, false, false],
    ]);
    expect(body.path).toEqual({
      path: 'team_search/nothing.md',
      scope: 'team_search',
      decision: { allowed: true, rule: 'creator-member', outcome: 'allow', why: 'creator alice is a member of team search now' },
      exists: false,
      sha256: null,
      size: null,
      materialised: false,
      readAnswer: { status: 404, code: 'not_found', message: 'no such file: team_search/nothing.md' },
    });
    expect(body.readSet).toEqual([]);
  });

  it('a path in a team the creator is not in reads exactly as a missing file, and is never looked up', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const { body } = await explain({ session: alice.sessionId, path: 'team_billing/DUTY.md' });
    expect(body.path).toEqual({
      path: 'team_billing/DUTY.md',
      scope: 'team_billing',
      decision: { allowed: false, rule: 'creator-not-member', outcome: 'deny', why: 'creator alice is not a member of team billing (member of payments, search)' },
      exists: null,
      sha256: null,
      size: null,
      materialised: false,
      readAnswer: { status: 404, code: 'not_found', message: 'no such file: team_billing/DUTY.md' },
    });
  });

  it('a creator in no team, and one the source does not know', async () => {
    const carol = await cp.createSession({ kind: 'personal', creator: 'carol' });
    const none = (await explain({ session: carol.sessionId })).body;
    expect(none.membership).toEqual({ source: 'directory', status: 'ok', teams: [], error: null });
    expect(none.scopes.find((s) => s.scope === 'team_search')?.decision.why).toBe('creator carol is not a member of team search (member of no teams)');
    // carol has left the directory since her session was made.
    override = async () => ({ status: 'unknown-user' });
    try {
      const unknown = (await explain({ session: carol.sessionId })).body;
      expect(unknown.membership).toEqual({ source: 'directory', status: 'unknown-user', teams: null, error: null });
      expect(unknown.scopes.find((s) => s.scope === 'team_search')?.decision).toEqual({ allowed: false, rule: 'creator-unknown', outcome: 'deny', why: 'the membership source does not know creator carol' });
      expect(unknown.loadableBytes).toBe(bytes('account/DUTY.md'));
    } finally {
      override = null;
    }
  });

  it('a membership source that fails or throws is reported, and every team fails closed', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    override = async () => ({ status: 'error', error: 'membership service answered 500' });
    try {
      const failed = (await explain({ session: alice.sessionId })).body;
      expect(failed.membership).toEqual({ source: 'directory', status: 'error', teams: null, error: 'membership service answered 500' });
      expect(failed.scopes.find((s) => s.scope === 'team_search')?.decision).toEqual({
        allowed: false,
        rule: 'membership-unavailable',
        outcome: 'fail_closed',
        why: 'the membership source failed (membership service answered 500): denied, fail closed',
      });
      override = () => Promise.reject(new Error('socket hang up'));
      const thrown = (await explain({ session: alice.sessionId })).body;
      expect(thrown.membership).toEqual({ source: 'directory', status: 'error', teams: null, error: 'socket hang up' });
      override = () => Promise.reject('not an Error');
      expect((await explain({ session: alice.sessionId })).body.membership.error).toBe('not an Error');
    } finally {
      override = null;
    }
  });
});

describe('a team session', () => {
  it('allows only the account and its team, with the rule for every other team', async () => {
    const bob = await cp.createSession({ kind: 'team', creator: 'bob', team: 'storage' });
    const { body } = await explain({ session: bob.sessionId, path: 'team_billing/DUTY.md' });
    expect(body.session).toEqual({ id: bob.sessionId, kind: 'team', creator: 'bob', team: 'storage', revoked: false, createdAt: expect.any(String), mounted: [] });
    const why = 'a team session of team storage loads only its own team and the account, with no exception for any role';
    expect(body.scopes.map((s) => [s.scope, s.loadable, s.decision.rule, s.decision.why])).toEqual([
      ['account', true, 'account', 'the account scope is open to every session'],
      ['team_billing', false, 'team-session-other-team', why],
      ['team_payments', false, 'team-session-other-team', why],
      ['team_search', false, 'team-session-other-team', why],
      ['team_storage', true, 'bound-team', 'the session is bound to team storage'],
    ]);
    expect(body.path?.readAnswer).toMatchObject({ status: 403, code: 'denied' });
    expect(body.path?.readAnswer.message).toContain('cannot load team "billing"');
  });
});

describe('the decision log', () => {
  it('shows the last decisions when the sink can read them back, and why not when it fails', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    expect((await explain({ session: alice.sessionId })).body.recentDecisions).toBeUndefined();
    const asked: [string, number][] = [];
    recent = async (session, limit) => {
      asked.push([session, limit]);
      return records.filter((r) => r.session === session).slice(-limit).reverse();
    };
    try {
      const { body } = await explain({ session: alice.sessionId });
      expect(asked).toEqual([[alice.sessionId, 20]]);
      const last = records.filter((r) => r.session === alice.sessionId).at(-1) as AuditRecord;
      expect(body.recentDecisions?.error).toBeNull();
      expect(body.recentDecisions?.decisions[0]).toEqual({ time: last.time, replica: last.replica, action: 'explain', scope: last.scope, result: last.result, rule: last.rule, requestId: last.requestId });
      recent = async () => {
        throw new Error('PostgreSQL unreachable');
      };
      expect((await explain({ session: alice.sessionId })).body.recentDecisions).toEqual({ decisions: [], error: 'the decision log could not be read: PostgreSQL unreachable' });
    } finally {
      recent = undefined;
    }
  });

  it('audits each scope it decided once, with action "explain"', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const before = records.length;
    await explain({ session: alice.sessionId, path: 'team_billing/DUTY.md' });
    const mine = records.slice(before).filter((r) => r.session === alice.sessionId);
    expect(mine.map((r) => [r.action, r.scope]).sort()).toEqual(
      [['explain', 'account'], ['explain', 'team_billing'], ['explain', 'team_payments'], ['explain', 'team_search'], ['explain', 'team_storage']].sort(),
    );
  });
});

describe('bad requests', () => {
  it('names what is missing or unknown', async () => {
    expect(await explain({})).toEqual({ status: 400, body: { error: { code: 'invalid_argument', message: 'explain needs ?session=<session id>' } } });
    expect(await explain({ session: '' })).toEqual({ status: 400, body: { error: { code: 'invalid_argument', message: 'explain needs ?session=<session id>' } } });
    expect(await explain({ session: 'ses_nope' })).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'no such session: ses_nope' } } });
  });
});
