// POST /v1/can-load over real HTTP: CanLoadScope for a harness's skills, MCP
// tools and sub-agents, with the read tool's answer shapes, one membership
// lookup per request, an audit line per scope whose action is the resource
// kind, the decisions metric, and nothing mounted or added to the read set.

import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS } from '../src/core/metrics.js';
import type { CanLoadResponse, SessionView } from '../src/core/wire.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

let dir: string;
let members: FaultMembership;
let cp: TestControlPlane;

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
  cp = await startControlPlane({ dataDir: dir, membershipUrl: members.url, membershipTimeoutMs: 300 });
});
afterAll(async () => {
  await cp?.close();
  await members?.close();
  await removeDataDir(dir);
});
beforeEach(async () => {
  await members.setMode({ kind: 'ok' });
  members.resetCalls();
});

async function canLoad(token: string, body: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(`${cp.url}/v1/can-load`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as unknown, text };
}
const answers = async (token: string, scopes: string[], kind: string) => {
  const r = await canLoad(token, { scopes, for: kind });
  expect(r.status).toBe(200);
  return (r.json as CanLoadResponse).answers;
};
const view = async (token: string) => (await (await fetch(`${cp.url}/v1/session`, { headers: { authorization: `Bearer ${token}` } })).json()) as SessionView;

describe('POST /v1/can-load', () => {
  it('a personal session: the account, the bound team and the creator\'s teams are allowed, in one membership lookup', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    members.resetCalls();
    const got = await answers(s.token, ['account', 'team_payments', 'team_search', 'team_storage', 'team_nosuch'], 'skill');
    expect(got.map((a) => [a.scope, a.allowed])).toEqual([
      ['account', true],
      ['team_payments', true],
      ['team_search', true],
      ['team_storage', false],
      ['team_nosuch', false],
    ]);
    expect(members.calls('alice')).toBe(1);
  });

  it('a personal session\'s refusal is byte for byte the answer for a scope that does not exist', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const refused = await canLoad(s.token, { scopes: ['team_storage'], for: 'tool' });
    const missing = await canLoad(s.token, { scopes: ['team_nosuch'], for: 'tool' });
    expect(refused.json).toEqual({ for: 'tool', answers: [{ scope: 'team_storage', allowed: false, error: { code: 'not_found', message: 'no such scope: team_storage' } }] });
    expect(refused.text.replaceAll('team_storage', 'X')).toBe(missing.text.replaceAll('team_nosuch', 'X'));
  });

  it('a team session: its own team and the account only; another team gets guidance naming its team, for every kind', async () => {
    const s = await cp.createSession({ kind: 'team', team: 'payments', creator: 'alice' });
    members.resetCalls();
    for (const kind of ['knowledge', 'skill', 'tool', 'agent']) {
      const got = await answers(s.token, ['account', 'team_payments', 'team_search'], kind);
      expect(got.slice(0, 2)).toEqual([{ scope: 'account', allowed: true }, { scope: 'team_payments', allowed: true }]);
      const refused = got[2];
      expect(refused).toMatchObject({ scope: 'team_search', allowed: false, error: { code: 'denied' } });
      if (refused?.allowed !== false) throw new Error('not refused');
      expect(refused.error.message).toContain('this session belongs to team "payments"');
      expect(refused.error.message).toContain('team "search"');
      expect(refused.error.message).toMatch(/personal session of someone who is a member of team "search"/);
    }
    // No lookup: a team session never asks who is a member of what.
    expect(members.calls('alice')).toBe(0);
  });

  it('the guidance names the kind of resource; for knowledge it is the read tool\'s own', async () => {
    const s = await cp.createSession({ kind: 'team', team: 'payments', creator: 'alice' });
    const [tool] = await answers(s.token, ['team_search'], 'tool');
    const [knowledge] = await answers(s.token, ['team_search'], 'knowledge');
    const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` }, body: JSON.stringify({ path: 'team_search/DUTY.md' }) });
    const readError = ((await read.json()) as { error: { message: string } }).error.message;
    expect(tool?.allowed === false && tool.error.message).toMatch(/cannot use team "search"'s MCP tools/);
    expect(knowledge?.allowed === false && knowledge.error.message).toBe(readError);
  });

  it('the membership source failing: other teams are refused, fail closed; account and bound team still allowed', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await members.setMode({ kind: 'down' });
    const got = await answers(s.token, ['account', 'team_payments', 'team_search'], 'agent');
    expect(got.slice(0, 2).every((a) => a.allowed)).toBe(true);
    expect(got[2]).toMatchObject({ scope: 'team_search', allowed: false, error: { code: 'membership_unavailable' } });
  });

  it('registers no mount and adds nothing to the read set', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const before = await view(s.token);
    await answers(s.token, ['team_search'], 'knowledge');
    await answers(s.token, ['team_search'], 'skill');
    expect(await view(s.token)).toEqual(before);
    expect(before.mounted).toEqual([]);
    const session = await cp.cp.sessions.authenticate(s.token);
    expect(session?.readSet).toEqual([]);
    const plan = (await (await fetch(`${cp.url}/v1/plan?threshold=0`, { headers: { authorization: `Bearer ${s.token}` } })).json()) as { scopes: { scope: string }[] };
    expect(plan.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments']);
  });

  it('each decision is audited with the kind as its action, the rule and the membership answer, and counted', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const counted = async (action: string, outcome: string) =>
      (await cp.cp.metrics.samples(CONTROL_PLANE_METRICS.decisions)).find((x) => x.labels.action === action && x.labels.outcome === outcome && x.labels.session_kind === 'personal')?.value ?? 0;
    const before = { allow: await counted('tool', 'allow'), deny: await counted('tool', 'deny') };
    await answers(s.token, ['team_search', 'team_storage'], 'tool');
    await cp.cp.audit.flush();
    const lines = (await readFile(cp.cp.options.auditLog, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const mine = lines.filter((l) => l.session === s.sessionId && l.action === 'tool');
    expect(mine).toEqual([
      expect.objectContaining({ scope: 'team_search', rule: 'creator-member', result: 'allow', membership: { status: 'ok', teams: ['payments', 'search'] } }),
      expect.objectContaining({ scope: 'team_storage', rule: 'creator-not-member', result: 'deny', membership: { status: 'ok', teams: ['payments', 'search'] } }),
    ]);
    expect(await counted('tool', 'allow')).toBe(before.allow + 1);
    expect(await counted('tool', 'deny')).toBe(before.deny + 1);
  });

  it.each([
    [{ scopes: ['account'] }, /"for" must be one of knowledge, skill, tool, agent/],
    [{ scopes: ['account'], for: 'prompt' }, /"for" must be one of knowledge, skill, tool, agent, not "prompt"/],
    [{ scopes: [], for: 'skill' }, /"scopes" must be a non-empty list/],
    [{ scopes: 'account', for: 'skill' }, /"scopes" must be a non-empty list/],
    [{ scopes: ['payments'], for: 'skill' }, /"payments" is not a scope name: the account is "account", a team "team_<id>"/],
    [{ scopes: ['team_..'], for: 'skill' }, /"team_\.\." is not a scope name/],
    [{ scopes: [7], for: 'skill' }, /7 is not a scope name/],
    [{ scopes: Array.from({ length: 101 }, () => 'account'), for: 'skill' }, /at most 100 scopes per request, got 101/],
    ['not json', /request body must be JSON like/],
  ])('refuses a malformed request %j with 400 naming what is wrong, and decides nothing', async (body, message) => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    members.resetCalls();
    const r = await canLoad(s.token, body);
    expect(r.status).toBe(400);
    expect((r.json as { error: { code: string; message: string } }).error).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(message) });
    expect(members.calls('alice')).toBe(0);
  });

  it('needs a runner token', async () => {
    const r = await fetch(`${cp.url}/v1/can-load`, { method: 'POST', body: JSON.stringify({ scopes: ['account'], for: 'skill' }) });
    expect(r.status).toBe(401);
  });
});
