// What every route shares, in this process: the response builders (an error
// answer's status, headers and body from its code alone), scope paths from a
// URL or a JSON body, the prefetch slots, and the per-request decider (one
// membership lookup, every decision audited and counted, denials answered as
// the session's kind requires).

import { describe, expect, it } from 'vitest';
import { KnowledgeError, type ErrorCode, ERROR_CODES } from '../src/core/errors.js';
import { CONTROL_PLANE_METRICS, NO_METRICS, type MetricsRecorder } from '../src/core/metrics.js';
import type { Decision, MembershipAnswer } from '../src/core/session/policy.js';
import { HTTP_STATUS, SHED_HEADER } from '../src/core/wire.js';
import type { AuditRecord, AuditSink } from '../src/server/access/audit-log.js';
import { teamDenialMessage } from '../src/server/access/guidance.js';
import { assertNever, audit, boundScopes, decider, denialOf, denialResponse, identityOf, type RouteContext } from '../src/server/context.js';
import {
  bodyParts,
  empty,
  errorResponse,
  fromError,
  jsonResponse,
  notFound,
  notFoundMessage,
  parseEncodedScopePath,
  parseScopePath,
  rawJsonResponse,
  RETRY_AFTER_SECONDS,
} from '../src/server/http/api.js';
import { PREFETCH_RETRY_AFTER_SECONDS, PrefetchSlots, releasingAtEnd } from '../src/server/http/prefetch-slots.js';
import type { SessionRecord } from '../src/server/state/session-state.js';

const JSON_TYPE = 'application/json; charset=utf-8';

describe('response builders', () => {
  it('JSON answers carry their type, and extra headers', () => {
    expect(jsonResponse(200, { a: 1 })).toEqual({ status: 200, headers: { 'content-type': JSON_TYPE }, body: '{"a":1}' });
    expect(jsonResponse(201, [], { etag: '"x"' })).toEqual({ status: 201, headers: { 'content-type': JSON_TYPE, etag: '"x"' }, body: '[]' });
    const parts = [Buffer.from('{"a":'), Buffer.from('1}')];
    expect(rawJsonResponse(200, parts, { etag: '"y"' })).toEqual({ status: 200, headers: { 'content-type': JSON_TYPE, etag: '"y"' }, body: parts });
    expect(rawJsonResponse(304, '{}')).toEqual({ status: 304, headers: { 'content-type': JSON_TYPE }, body: '{}' });
    expect(empty(204)).toEqual({ status: 204, headers: {}, body: '' });
    expect(empty(304, { etag: '"z"' })).toEqual({ status: 304, headers: { etag: '"z"' }, body: '' });
  });

  it('a body as the buffers sent: at least one', () => {
    expect(bodyParts('héllo')).toEqual([Buffer.from('héllo', 'utf8')]);
    const one = Buffer.from('x');
    expect(bodyParts(one)[0]).toBe(one);
    const parts = [Buffer.from('a'), Buffer.from('b')];
    expect(bodyParts(parts)).toBe(parts);
    expect(bodyParts([])).toEqual([Buffer.alloc(0)]);
    expect(bodyParts('')).toEqual([Buffer.alloc(0)]);
  });

  it('an error answer: the status of its code, {error: {code, message}}; 401 asks for a bearer token, 503 says when to retry', () => {
    for (const code of ERROR_CODES) {
      const res = fromError(new KnowledgeError(code, `why ${code}`));
      expect(res.status, code).toBe(HTTP_STATUS[code]);
      expect(JSON.parse(res.body as string)).toEqual({ error: { code, message: `why ${code}` } });
      const extra = code === 'unauthorized' ? { 'www-authenticate': 'Bearer' } : code === 'unavailable' ? { 'retry-after': '1' } : {};
      expect(res.headers, code).toEqual({ 'content-type': JSON_TYPE, ...extra });
    }
    expect(RETRY_AFTER_SECONDS).toBe(1);
    expect(errorResponse('too_large' as ErrorCode, 'big', { 'x-a': 'b' }).headers).toEqual({ 'content-type': JSON_TYPE, 'x-a': 'b' });
  });

  it('a missing file: 404 naming it, the same for every caller', () => {
    expect(notFoundMessage('team_x/a.md')).toBe('no such file: team_x/a.md');
    expect(notFound('team_x/a.md')).toEqual(errorResponse('not_found', 'no such file: team_x/a.md'));
    expect(notFound('team_x/a.md').status).toBe(404);
  });
});

describe('scope paths', () => {
  const refusal = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      expect((err as KnowledgeError).code).toBe('invalid_argument');
      return (err as Error).message;
    }
    throw new Error('accepted');
  };

  it('from a URL: decoded segment by segment', () => {
    expect(parseEncodedScopePath('team_x/runbooks/a%20b.md', true)).toEqual({ scope: 'team_x', path: 'runbooks/a b.md' });
    expect(parseEncodedScopePath('account/%C3%A9.md', true)).toEqual({ scope: 'account', path: 'é.md' });
    expect(parseEncodedScopePath('account', false)).toEqual({ scope: 'account', path: '' });
    expect(refusal(() => parseEncodedScopePath('account/%zz', true))).toBe('invalid path: bad percent-encoding');
    expect(refusal(() => parseEncodedScopePath('account/a%2Fb', true))).toBe('invalid path: encoded "/" in a name');
    expect(refusal(() => parseEncodedScopePath('account/%2e%2e/x', true))).toBe('invalid path: ".." segment');
    expect(refusal(() => parseEncodedScopePath('account//x', true))).toBe('invalid path: empty path segment');
    expect(refusal(() => parseEncodedScopePath('team_X/a', true))).toBe('invalid scope "team_X" (expected "account" or "team_<id>")');
    expect(refusal(() => parseEncodedScopePath('account', true))).toBe('invalid path: empty path');
    expect(refusal(() => parseEncodedScopePath('account/a', false))).toBe('invalid path: a scope name takes no path');
  });

  it('from a JSON body: already decoded, validated whole', () => {
    expect(parseScopePath('team_x/a%20b.md')).toEqual({ scope: 'team_x', path: 'a%20b.md' });
    expect(refusal(() => parseScopePath('/account/a'))).toBe('invalid path: absolute path');
    expect(refusal(() => parseScopePath('account/../x'))).toBe('invalid path: ".." segment');
    expect(refusal(() => parseScopePath('nope/a'))).toBe('invalid scope "nope" (expected "account" or "team_<id>")');
    expect(refusal(() => parseScopePath(''))).toBe('invalid path: empty path');
  });
});

describe('PrefetchSlots', () => {
  it('hands out as many slots as it has; a release frees one, once', () => {
    const slots = new PrefetchSlots(2);
    const a = slots.take();
    const b = slots.take();
    expect(slots.busy).toBe(2);
    expect(slots.take()).toBeUndefined();
    a?.();
    a?.();
    expect(slots.busy).toBe(1);
    const c = slots.take();
    expect(c).toBeDefined();
    expect(slots.take()).toBeUndefined();
    b?.();
    c?.();
    expect(slots.busy).toBe(0);
    expect(new PrefetchSlots(0).take()).toBeUndefined();
  });

  it('a shed batch: 503 with Retry-After and the shed header, naming the limit', () => {
    const res = new PrefetchSlots(4).shedResponse();
    expect(res.status).toBe(503);
    expect(res.headers).toEqual({ 'content-type': JSON_TYPE, 'retry-after': String(PREFETCH_RETRY_AFTER_SECONDS), [SHED_HEADER]: '1' });
    expect(JSON.parse(res.body as string)).toEqual({ error: { code: 'unavailable', message: "serving 4 prefetch batches already; ask again later (agents' requests go first)" } });
  });

  it('a stream releases its slot when it ends, is cut, or fails', async () => {
    async function* pieces(fail: boolean) {
      yield Buffer.from('a');
      yield Buffer.from('b');
      if (fail) throw new Error('cut');
    }
    let released = 0;
    const got: string[] = [];
    for await (const p of releasingAtEnd(pieces(false), () => void released++)) got.push(p.toString());
    expect(got).toEqual(['a', 'b']);
    expect(released).toBe(1);
    for await (const _ of releasingAtEnd(pieces(false), () => void released++)) break;
    expect(released).toBe(2);
    await expect((async () => { for await (const _ of releasingAtEnd(pieces(true), () => void released++)); })()).rejects.toThrow('cut');
    expect(released).toBe(3);
  });
});

describe('the route context', () => {
  const personal: SessionRecord = { id: 's1', kind: 'personal', creator: 'alice', tokenHash: 'h', revoked: false, mounted: [], readSet: [], createdAt: '2026-01-01T00:00:00.000Z' };
  const team: SessionRecord = { ...personal, id: 's2', kind: 'team', team: 'payments' };

  function contextOf(teams: Record<string, string[]>) {
    const records: AuditRecord[] = [];
    const counted: string[] = [];
    let lookups = 0;
    const sink: AuditSink = { append: (r) => void records.push(r), flush: async () => undefined, reopen: async () => undefined, close: async () => undefined };
    const metrics: MetricsRecorder = { ...NO_METRICS, inc: (spec, labels, by) => void counted.push(`${spec.name} ${JSON.stringify(labels)}${by === undefined ? '' : ` ${by}`}`) };
    const ctx = {
      options: { now: () => Date.parse('2026-06-01T12:00:00Z'), replicaId: 'r1' },
      audit: sink,
      metrics,
      membership: {
        teamsOf: async (user: string): Promise<MembershipAnswer> => {
          lookups++;
          return teams[user] === undefined ? { status: 'unknown-user' } : { status: 'ok', teams: teams[user] };
        },
      },
      requestId: 'req-1',
    } as unknown as RouteContext;
    return { ctx, records, counted, lookups: () => lookups };
  }

  it('identity and bound scopes', () => {
    expect(identityOf(team)).toEqual({ id: 's2', kind: 'team', creator: 'alice', team: 'payments' });
    expect(identityOf(personal)).toEqual({ id: 's1', kind: 'personal', creator: 'alice', team: undefined });
    expect(boundScopes(personal)).toEqual(['account']);
    expect(boundScopes(team)).toEqual(['account', 'team_payments']);
  });

  it('one membership lookup per decider; each decision audited with the request and counted; quiet ones neither', async () => {
    const t = contextOf({ alice: ['search'] });
    const d = decider(t.ctx, personal);
    expect(await d.decide('team_search', 'open')).toMatchObject({ scope: 'team_search', allowed: true, rule: 'creator-member' });
    expect(await d.decide('team_ops', 'plan')).toMatchObject({ allowed: false, rule: 'creator-not-member' });
    expect(await d.decide('account', 'plan', true)).toMatchObject({ allowed: true, rule: 'account' });
    expect(t.lookups()).toBe(1);
    expect(t.records).toEqual([
      { time: '2026-06-01T12:00:00.000Z', replica: 'r1', session: 's1', kind: 'personal', creator: 'alice', team: null, scope: 'team_search', action: 'open', rule: 'creator-member', membership: { status: 'ok', teams: ['search'] }, result: 'allow', requestId: 'req-1' },
      { time: '2026-06-01T12:00:00.000Z', replica: 'r1', session: 's1', kind: 'personal', creator: 'alice', team: null, scope: 'team_ops', action: 'plan', rule: 'creator-not-member', membership: { status: 'ok', teams: ['search'] }, result: 'deny', requestId: 'req-1' },
    ]);
    const decisions = CONTROL_PLANE_METRICS.decisions.name;
    expect(t.counted).toEqual([`${decisions} {"action":"open","session_kind":"personal","outcome":"allow"}`, `${decisions} {"action":"plan","session_kind":"personal","outcome":"deny"}`]);
  });

  it('a caller may pass its own membership source: the decider asks it instead', async () => {
    const t = contextOf({});
    let asked = 0;
    const d = decider(t.ctx, personal, { teamsOf: async () => (asked++, { status: 'ok', teams: ['x'] }) });
    expect((await d.decide('team_x', 'open')).allowed).toBe(true);
    expect(asked).toBe(1);
    expect(t.lookups()).toBe(0);
  });

  it('audit alone: a fail-closed decision is counted as such', () => {
    const t = contextOf({});
    const decision: Decision = { scope: 'team_x', allowed: false, rule: 'membership-unavailable', membership: { status: 'error', error: 'down' } };
    audit(t.ctx, team, 'read', decision);
    expect(t.records[0]).toMatchObject({ session: 's2', kind: 'team', team: 'payments', result: 'deny', rule: 'membership-unavailable', membership: { status: 'error', error: 'down' } });
    expect(t.counted).toEqual([`${CONTROL_PLANE_METRICS.decisions.name} {"action":"read","session_kind":"team","outcome":"fail_closed"}`]);
  });

  it('denials: membership down is 503 for everyone; a team session is told why; a personal one gets the missing-file answer', () => {
    const down: Decision = { scope: 'team_x', allowed: false, rule: 'membership-unavailable' };
    const other: Decision = { scope: 'team_x', allowed: false, rule: 'team-session-other-team' };
    const notMember: Decision = { scope: 'team_x', allowed: false, rule: 'creator-not-member' };
    const unavailable = { code: 'membership_unavailable', message: 'cannot decide whether this session may load team_x: the membership source is unavailable; try again later' };
    expect(denialOf(personal, down, 'team_x/a.md')).toEqual(unavailable);
    expect(denialOf(team, down, 'team_x/a.md')).toEqual(unavailable);
    expect(denialOf(team, other, 'team_x/a.md')).toEqual({ code: 'denied', message: teamDenialMessage('payments', 'team_x', 'knowledge') });
    expect(denialOf(team, other, 'team_x', 'skill')).toEqual({ code: 'denied', message: teamDenialMessage('payments', 'team_x', 'skill') });
    expect(denialOf(personal, notMember, 'team_x/a.md')).toEqual({ code: 'not_found', message: 'no such file: team_x/a.md' });
    expect(denialResponse(personal, notMember, 'team_x/a.md')).toEqual(notFound('team_x/a.md'));
    expect(denialResponse(team, other, 'team_x/a.md').status).toBe(403);
    expect(denialResponse(personal, down, 'team_x/a.md').status).toBe(503);
  });

  it('assertNever names the value it did not expect', () => {
    expect(() => assertNever('surprise' as never)).toThrow(new KnowledgeError('internal', 'unexpected value surprise'));
  });
});
