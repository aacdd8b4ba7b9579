// POST /v1/can-load over a stand-in context: one membership lookup for every
// scope asked, each decision audited under the resource kind, and each
// refusal in the shape the session's kind requires (a personal session's
// word for word a missing scope's).

import { describe, expect, it } from 'vitest';
import { CAN_LOAD_EXAMPLE } from '../src/core/can-load-request.js';
import { KnowledgeError } from '../src/core/errors.js';
import { NO_METRICS } from '../src/core/metrics.js';
import type { MembershipAnswer } from '../src/core/session/policy.js';
import type { AuditRecord } from '../src/server/access/audit-log.js';
import { teamDenialMessage } from '../src/server/access/guidance.js';
import type { RouteContext } from '../src/server/context.js';
import type { ApiRequest } from '../src/server/http/api.js';
import { canLoadRoute, noSuchScopeMessage } from '../src/server/http/can-load-route.js';
import type { SessionRecord } from '../src/server/state/session-state.js';

const personal: SessionRecord = { id: 's1', kind: 'personal', creator: 'alice', tokenHash: 'h', revoked: false, mounted: [], readSet: [], createdAt: '2026-01-01T00:00:00.000Z' };
const team: SessionRecord = { ...personal, id: 's2', kind: 'team', team: 'payments' };

function contextOf(answer: MembershipAnswer) {
  const records: AuditRecord[] = [];
  let lookups = 0;
  const ctx = {
    options: { now: () => 0, replicaId: 'r' },
    audit: { append: (r: AuditRecord) => void records.push(r) },
    metrics: NO_METRICS,
    membership: { teamsOf: async () => (lookups++, answer) },
  } as unknown as RouteContext;
  return { ctx, records, lookups: () => lookups };
}

const request = (body: unknown) => ({ body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) }) as ApiRequest;

describe('canLoadRoute', () => {
  it('answers each scope in order, with one membership lookup, each decision audited under the resource kind', async () => {
    const t = contextOf({ status: 'ok', teams: ['search'] });
    const res = await canLoadRoute(t.ctx, personal, request({ for: 'skill', scopes: ['account', 'team_search', 'team_ops'] }));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body as string)).toEqual({
      for: 'skill',
      answers: [
        { scope: 'account', allowed: true },
        { scope: 'team_search', allowed: true },
        { scope: 'team_ops', allowed: false, error: { code: 'not_found', message: 'no such scope: team_ops' } },
      ],
    });
    expect(t.lookups()).toBe(1);
    expect(t.records.map((r) => [r.scope, r.action, r.result])).toEqual([
      ['account', 'skill', 'allow'],
      ['team_search', 'skill', 'allow'],
      ['team_ops', 'skill', 'deny'],
    ]);
    expect(noSuchScopeMessage('x')).toBe('no such scope: x');
  });

  it("a team session's refusal is guidance for the resource kind; a membership failure fails closed", async () => {
    const t = contextOf({ status: 'ok', teams: [] });
    const res = await canLoadRoute(t.ctx, team, request({ for: 'tool', scopes: ['team_payments', 'team_ops'] }));
    expect(JSON.parse(res.body as string).answers).toEqual([
      { scope: 'team_payments', allowed: true },
      { scope: 'team_ops', allowed: false, error: { code: 'denied', message: teamDenialMessage('payments', 'team_ops', 'tool') } },
    ]);
    const down = contextOf({ status: 'error', error: 'down' });
    const failed = JSON.parse((await canLoadRoute(down.ctx, personal, request({ for: 'knowledge', scopes: ['team_ops'] }))).body as string);
    expect(failed.answers[0]).toEqual({
      scope: 'team_ops',
      allowed: false,
      error: { code: 'membership_unavailable', message: 'cannot decide whether this session may load team_ops: the membership source is unavailable; try again later' },
    });
  });

  it('a body that is not JSON names the shape wanted; a bad request is refused by the parser', async () => {
    const t = contextOf({ status: 'ok', teams: [] });
    await expect(canLoadRoute(t.ctx, personal, request('{'))).rejects.toThrow(new KnowledgeError('invalid_argument', `request body must be JSON like ${CAN_LOAD_EXAMPLE}`));
    await expect(canLoadRoute(t.ctx, personal, request({ for: 'skill', scopes: [] }))).rejects.toThrow(/"scopes" must be a non-empty list/);
    expect(t.lookups()).toBe(0);
    expect(t.records).toEqual([]);
  });
});
