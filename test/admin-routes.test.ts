// Creating and revoking sessions, over a stand-in context: each refusal of a
// create request (its exact message), which teams a session may name, what
// the membership answer decides, what is stored, answered and logged; and a
// revocation by id.

import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import type { MembershipAnswer } from '../src/core/session/policy.js';
import type { RouteContext } from '../src/server/context.js';
import { createSessionRoute, revokeSessionRoute } from '../src/server/http/admin-routes.js';
import type { NewSession, SessionRecord } from '../src/server/state/session-state.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');

function contextOf(options: { members?: Record<string, string[]>; membershipDown?: boolean; packs?: string[] } = {}) {
  const created: { input: NewSession; at: string }[] = [];
  const revoked: string[] = [];
  const logged: { line: string; meta: unknown }[] = [];
  const ctx = {
    options: { now: () => NOW, log: (line: string, meta?: unknown) => void logged.push({ line, meta }) },
    directory: { directory: { teams: new Map([['payments', { name: 'Payments' }], ['search', { name: 'Search' }]]), users: new Map() } },
    store: { snapshot: (scope: string) => ((options.packs ?? []).map((t) => `team_${t}`).includes(scope) ? { scope } : undefined) },
    membership: {
      teamsOf: async (user: string): Promise<MembershipAnswer> => {
        if (options.membershipDown) return { status: 'error', error: 'service down' };
        const teams = (options.members ?? { alice: ['payments'] })[user];
        return teams === undefined ? { status: 'unknown-user' } : { status: 'ok', teams };
      },
    },
    sessions: {
      create: async (input: NewSession, at: string) => {
        created.push({ input, at });
        const record = { id: `s${created.length}`, ...input, tokenHash: 'h', revoked: false, mounted: [], readSet: [], createdAt: at } as SessionRecord;
        return { record, token: `tok-${created.length}` };
      },
      revoke: async (id: string) => {
        revoked.push(id);
        return id === 'known';
      },
    },
    requestId: 'req-3',
  } as unknown as RouteContext;
  return { ctx, created, revoked, logged };
}

const body = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

async function refusal(ctx: RouteContext, value: unknown): Promise<string> {
  const err = await createSessionRoute(ctx, body(value)).then(() => undefined, (e: unknown) => e);
  expect(err, JSON.stringify(value)).toBeInstanceOf(KnowledgeError);
  expect((err as KnowledgeError).code).toBe('invalid_argument');
  return (err as Error).message;
}

describe('createSessionRoute', () => {
  it('refuses a body that is not a JSON object, naming the shape wanted', async () => {
    const { ctx, created } = contextOf();
    expect(await refusal(ctx, '{"kind":')).toBe('request body must be JSON like {"kind": "team", "creator": "alice", "team": "payments"}');
    for (const value of ['[]', 'null', '"team"', '3']) expect(await refusal(ctx, value)).toBe('request body must be a JSON object');
    expect(created).toEqual([]);
  });

  it('refuses each bad field by name', async () => {
    const { ctx } = contextOf();
    expect(await refusal(ctx, { creator: 'alice' })).toBe('"kind" must be "team" or "personal"');
    expect(await refusal(ctx, { kind: 'admin', creator: 'alice' })).toBe('"kind" must be "team" or "personal"');
    expect(await refusal(ctx, { kind: 'personal' })).toBe('"creator" must be a user name');
    expect(await refusal(ctx, { kind: 'personal', creator: '' })).toBe('"creator" must be a user name');
    expect(await refusal(ctx, { kind: 'personal', creator: 7 })).toBe('"creator" must be a user name');
    expect(await refusal(ctx, { kind: 'personal', creator: '..' })).toMatch(/^"creator" is a path step/);
    expect(await refusal(ctx, { kind: 'personal', creator: 'alice', team: 'Pay Ments' })).toBe('"team" must be a team id ([a-z0-9][a-z0-9_-]{0,62}), got "Pay Ments"');
    expect(await refusal(ctx, { kind: 'personal', creator: 'alice', team: 5 })).toBe('"team" must be a team id ([a-z0-9][a-z0-9_-]{0,62}), got 5');
    expect(await refusal(ctx, { kind: 'team', creator: 'alice' })).toBe('a team session needs "team"');
    expect(await refusal(ctx, { kind: 'team', creator: 'alice', team: null })).toBe('a team session needs "team"');
  });

  it('a team must be in directory.json or have a pack', async () => {
    const { ctx } = contextOf({ packs: ['ops'], members: { alice: ['payments', 'ops'] } });
    expect(await refusal(ctx, { kind: 'team', creator: 'alice', team: 'nowhere' })).toBe('unknown team "nowhere" (not in directory.json and no pack at teams/nowhere/)');
    expect((await createSessionRoute(ctx, body({ kind: 'team', creator: 'alice', team: 'ops' }))).status).toBe(201);
    expect((await createSessionRoute(ctx, body({ kind: 'team', creator: 'alice', team: 'search' }))).status).toBe(201);
  });

  it('the creator must be known; a membership failure is 503 naming why', async () => {
    expect(await refusal(contextOf().ctx, { kind: 'personal', creator: 'mallory' })).toBe('unknown user "mallory"');
    const down = contextOf({ membershipDown: true });
    const res = await createSessionRoute(down.ctx, body({ kind: 'team', creator: 'alice', team: 'payments' }));
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body as string)).toEqual({ error: { code: 'membership_unavailable', message: 'cannot check user "alice": service down' } });
    expect(down.created).toEqual([]);
  });

  it("a personal session may be bound only to one of its creator's teams; a team session to any known team", async () => {
    const { ctx } = contextOf({ members: { alice: ['payments', 'ops'], bob: [] }, packs: ['ops'] });
    expect(await refusal(ctx, { kind: 'personal', creator: 'alice', team: 'search' })).toBe(
      'user "alice" is not a member of team "search": a personal session can only be bound to one of its creator\'s teams (payments, ops); create a team session for search instead',
    );
    expect(await refusal(ctx, { kind: 'personal', creator: 'bob', team: 'search' })).toBe(
      'user "bob" is not a member of team "search": a personal session can only be bound to one of its creator\'s teams (none); create a team session for search instead',
    );
    expect((await createSessionRoute(ctx, body({ kind: 'personal', creator: 'alice', team: 'payments' }))).status).toBe(201);
    expect((await createSessionRoute(ctx, body({ kind: 'team', creator: 'bob', team: 'search' }))).status).toBe(201);
  });

  it('stores the request at the current time, answers 201 with the token, and logs the session', async () => {
    const { ctx, created, logged } = contextOf();
    const res = await createSessionRoute(ctx, body({ kind: 'team', creator: 'alice', team: 'payments', extra: 'ignored' }));
    expect(res.status).toBe(201);
    expect(JSON.parse(res.body as string)).toEqual({ sessionId: 's1', token: 'tok-1', kind: 'team', creator: 'alice', team: 'payments' });
    expect(created).toEqual([{ input: { kind: 'team', creator: 'alice', team: 'payments' }, at: '2026-06-01T12:00:00.000Z' }]);
    expect(logged).toEqual([{ line: 'session s1 created (team, creator alice, team payments; request req-3)', meta: { session: 's1', requestId: 'req-3' } }]);
    const personal = await createSessionRoute(ctx, body({ kind: 'personal', creator: 'alice', team: null }));
    expect(JSON.parse(personal.body as string)).toEqual({ sessionId: 's2', token: 'tok-2', kind: 'personal', creator: 'alice' });
    expect(created[1]?.input).toEqual({ kind: 'personal', creator: 'alice' });
    expect(logged[1]?.line).toBe('session s2 created (personal, creator alice; request req-3)');
  });

  it('a log line without a request id says "-"', async () => {
    const { ctx, logged } = contextOf();
    await createSessionRoute({ ...ctx, requestId: undefined } as unknown as RouteContext, body({ kind: 'personal', creator: 'alice' }));
    expect(logged[0]?.line).toBe('session s1 created (personal, creator alice; request -)');
  });
});

describe('revokeSessionRoute', () => {
  it('204 for a known session, logged; 404 naming an unknown one; 400 for a bad encoding', async () => {
    const { ctx, revoked, logged } = contextOf();
    const res = await revokeSessionRoute(ctx, 'known');
    expect(res).toEqual({ status: 204, headers: {}, body: '' });
    expect(logged).toEqual([{ line: 'session known revoked (request req-3)', meta: { session: 'known', requestId: 'req-3' } }]);
    const missing = await revokeSessionRoute(ctx, 'a%20b');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body as string)).toEqual({ error: { code: 'not_found', message: 'no such session: a b' } });
    expect(revoked).toEqual(['known', 'a b']);
    await expect(revokeSessionRoute(ctx, '%zz')).rejects.toThrow(new KnowledgeError('invalid_argument', 'invalid session id'));
    expect(logged.length).toBe(1);
    await revokeSessionRoute({ ...ctx, requestId: undefined } as unknown as RouteContext, 'known');
    expect(logged[1]?.line).toBe('session known revoked (request -)');
  });
});
