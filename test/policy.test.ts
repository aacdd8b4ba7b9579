// CanLoadScope matrix: team and personal sessions × creator memberships ×
// roles (no exemption) × bound team × membership source failing, timing out
// or not knowing the creator. Roles live in directory.json and never reach
// the policy: the matrix checks that whatever the role, only membership of
// the *creator* counts.

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canLoadScope, createScopeEvaluator, needsMembership, type MembershipAnswer, type SessionIdentity } from '../src/core/session/policy.js';
import { teamScope } from '../src/core/scope.js';

const ok = (...teams: string[]): MembershipAnswer => ({ status: 'ok', teams });
const unknown: MembershipAnswer = { status: 'unknown-user' };
const failing: MembershipAnswer = { status: 'error', error: 'HTTP 500' };

const team = (id: string, bound: string): SessionIdentity => ({ id: 's1', kind: 'team', creator: 'alice', team: bound });
const personal = (creator: string, bound?: string): SessionIdentity => ({ id: 's2', kind: 'personal', creator, team: bound });

describe('CanLoadScope: account and bound team', () => {
  it.each([
    ['team session', team('x', 'payments')],
    ['personal session, bound', personal('alice', 'payments')],
    ['personal session, unbound', personal('alice')],
  ])('%s: account is allowed whatever the membership answer', (_name, session) => {
    for (const m of [undefined, ok(), unknown, failing]) {
      expect(canLoadScope(session, 'account', m)).toMatchObject({ allowed: true, rule: 'account' });
    }
    expect(needsMembership(session, 'account')).toBe(false);
  });

  it.each([
    ['team session', team('x', 'payments')],
    ['personal session', personal('alice', 'payments')],
  ])('%s: the bound team is allowed even when the creator is not a member or membership fails', (_name, session) => {
    for (const m of [undefined, ok(), ok('search'), unknown, failing]) {
      expect(canLoadScope(session, 'team_payments', m)).toMatchObject({ allowed: true, rule: 'bound-team' });
    }
    expect(needsMembership(session, 'team_payments')).toBe(false);
  });
});

describe('CanLoadScope: other teams', () => {
  // creator memberships × role: the role is never an input, so admin and owner
  // creators get exactly what a member gets.
  const roles = ['member', 'admin', 'owner'] as const;

  describe.each(roles)('creator role %s', (_role) => {
    it('team session: another team is denied even if the creator belongs to both', () => {
      const s = team('x', 'payments');
      for (const m of [undefined, ok('payments', 'search'), ok('search'), unknown, failing]) {
        expect(canLoadScope(s, 'team_search', m)).toMatchObject({ allowed: false, rule: 'team-session-other-team' });
      }
      expect(needsMembership(s, 'team_search')).toBe(false);
    });

    it('personal session: allowed iff the creator is a member now', () => {
      const s = personal('alice', 'payments');
      expect(needsMembership(s, 'team_search')).toBe(true);
      expect(canLoadScope(s, 'team_search', ok('payments', 'search'))).toMatchObject({ allowed: true, rule: 'creator-member' });
      expect(canLoadScope(s, 'team_search', ok('payments'))).toMatchObject({ allowed: false, rule: 'creator-not-member' });
      expect(canLoadScope(s, 'team_search', ok())).toMatchObject({ allowed: false, rule: 'creator-not-member' });
    });

    it('personal session without a bound team: the same rule', () => {
      const s = personal('alice');
      expect(canLoadScope(s, 'team_search', ok('search'))).toMatchObject({ allowed: true, rule: 'creator-member' });
      expect(canLoadScope(s, 'team_payments', ok('search'))).toMatchObject({ allowed: false, rule: 'creator-not-member' });
    });
  });

  it('personal session: unknown creator, failing source and missing answer all deny (fail closed)', () => {
    const s = personal('ghost', 'payments');
    expect(canLoadScope(s, 'team_search', unknown)).toMatchObject({ allowed: false, rule: 'creator-unknown', membership: unknown });
    expect(canLoadScope(s, 'team_search', failing)).toMatchObject({ allowed: false, rule: 'membership-unavailable', membership: failing });
    expect(canLoadScope(s, 'team_search', undefined)).toMatchObject({ allowed: false, rule: 'membership-unavailable' });
  });

  it('the decision carries the membership answer it rested on', () => {
    const answer = ok('search');
    expect(canLoadScope(personal('alice'), 'team_search', answer).membership).toBe(answer);
  });

  it('invalid scope names are denied', () => {
    for (const scope of ['', 'team_', 'team_UPPER', 'teams', '../account', 'team_a/b']) {
      expect(canLoadScope(personal('alice'), scope, ok('a'))).toMatchObject({ allowed: false, rule: 'invalid-scope' });
    }
  });

  it('property: a team session never loads a team other than its own', () => {
    const id = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,10}$/);
    fc.assert(
      fc.property(id, id, fc.array(id), (bound, other, teams) => {
        fc.pre(bound !== other);
        const d = canLoadScope(team('x', bound), teamScope(other), ok(...teams));
        return !d.allowed;
      }),
    );
  });

  it('property: a personal session loads another team iff its membership answer lists it', () => {
    const id = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,10}$/);
    fc.assert(
      fc.property(id, fc.array(id), (other, teams) => {
        const d = canLoadScope(personal('alice'), teamScope(other), ok(...teams));
        return d.allowed === teams.includes(other);
      }),
    );
  });
});

describe('createScopeEvaluator (the per-request membership cache)', () => {
  it('asks the source once per evaluator and only for other teams', async () => {
    const calls: string[] = [];
    const evaluate = createScopeEvaluator(personal('alice', 'payments'), async (user) => {
      calls.push(user);
      return ok('search');
    });
    expect((await evaluate('account')).allowed).toBe(true);
    expect((await evaluate('team_payments')).allowed).toBe(true);
    expect(calls).toEqual([]);
    expect((await evaluate('team_search')).allowed).toBe(true);
    expect((await evaluate('team_storage')).allowed).toBe(false);
    expect(calls).toEqual(['alice']);
  });

  it('asks about the creator, never anyone else', async () => {
    const calls: string[] = [];
    const evaluate = createScopeEvaluator(personal('carol'), async (user) => {
      calls.push(user);
      return ok();
    });
    await evaluate('team_search');
    expect(calls).toEqual(['carol']);
  });

  it('a throwing source denies other teams but not account or the bound team', async () => {
    const evaluate = createScopeEvaluator(personal('alice', 'payments'), async () => {
      throw new Error('connect ECONNREFUSED');
    });
    expect(await evaluate('team_search')).toMatchObject({
      allowed: false,
      rule: 'membership-unavailable',
      membership: { status: 'error', error: 'connect ECONNREFUSED' },
    });
    expect((await evaluate('account')).allowed).toBe(true);
    expect((await evaluate('team_payments')).allowed).toBe(true);
  });

  it('a source that times out (answers an error) denies other teams', async () => {
    const evaluate = createScopeEvaluator(personal('alice'), async () => ({ status: 'error', error: 'timed out after 2000 ms' }));
    expect(await evaluate('team_search')).toMatchObject({ allowed: false, rule: 'membership-unavailable' });
  });

  it('team sessions never consult the source', async () => {
    let called = false;
    const evaluate = createScopeEvaluator(team('x', 'payments'), async () => {
      called = true;
      return ok('search');
    });
    expect((await evaluate('team_search')).allowed).toBe(false);
    expect(called).toBe(false);
  });

  it('a new evaluator (a new request) sees a membership change', async () => {
    let teams = ['search'];
    const lookup = async () => ok(...teams);
    expect((await createScopeEvaluator(personal('alice'), lookup)('team_search')).allowed).toBe(true);
    teams = [];
    expect((await createScopeEvaluator(personal('alice'), lookup)('team_search')).allowed).toBe(false);
  });
});
