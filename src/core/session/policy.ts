// CanLoadScope: the one rule deciding whether a session may bring a scope in.
//
//   1. account                                   → allow
//   2. the session's bound team                  → allow
//   3. another team, team session                → deny (no exemption of any kind)
//   4. another team, personal session            → allow iff the *creator* is a
//      member of that team now; creator unknown or membership source failing
//      → deny (fail closed)
//
// Pure: membership is passed in. `needsMembership` tells the caller whether it
// has to fetch it at all, so account and bound-team decisions never depend on
// the membership source being up.

import { ACCOUNT_SCOPE, parseScope, type ScopeName } from '../scope.js';

export type SessionKind = 'team' | 'personal';

export interface SessionIdentity {
  readonly id: string;
  readonly kind: SessionKind;
  /** The user who created a personal session; never the current speaker. */
  readonly creator?: string | undefined;
  /** The team a session is bound to: required for team sessions. */
  readonly team?: string | undefined;
}

export type MembershipAnswer =
  | { readonly status: 'ok'; readonly teams: readonly string[] }
  | { readonly status: 'unknown-user' }
  | { readonly status: 'error'; readonly error: string };

export type DecisionRule =
  | 'account'
  | 'bound-team'
  | 'team-session-other-team'
  | 'creator-member'
  | 'creator-not-member'
  | 'creator-unknown'
  | 'membership-unavailable'
  | 'invalid-scope';

export interface Decision {
  readonly scope: ScopeName;
  readonly allowed: boolean;
  readonly rule: DecisionRule;
  /** The membership answer the decision rested on, when rule 4 applied. */
  readonly membership?: MembershipAnswer;
}

/** True when deciding `scope` for `session` requires the creator's memberships. */
export function needsMembership(session: SessionIdentity, scope: ScopeName): boolean {
  const parsed = parseScope(scope);
  return (
    parsed !== null &&
    parsed.kind === 'team' &&
    parsed.teamId !== session.team &&
    session.kind === 'personal' &&
    session.creator !== undefined
  );
}

export function canLoadScope(
  session: SessionIdentity,
  scope: ScopeName,
  membership?: MembershipAnswer,
): Decision {
  const parsed = parseScope(scope);
  if (parsed === null) return { scope, allowed: false, rule: 'invalid-scope' };
  if (parsed.kind === 'account' || scope === ACCOUNT_SCOPE) {
    return { scope, allowed: true, rule: 'account' };
  }
  if (session.team !== undefined && parsed.teamId === session.team) {
    return { scope, allowed: true, rule: 'bound-team' };
  }
  if (session.kind === 'team') {
    return { scope, allowed: false, rule: 'team-session-other-team' };
  }
  if (session.creator === undefined) return { scope, allowed: false, rule: 'creator-unknown' };
  if (membership === undefined) {
    // Asked without the answer it needs: fail closed rather than guess.
    return {
      scope,
      allowed: false,
      rule: 'membership-unavailable',
      membership: { status: 'error', error: 'membership not fetched' },
    };
  }
  switch (membership.status) {
    case 'unknown-user':
      return { scope, allowed: false, rule: 'creator-unknown', membership };
    case 'error':
      return { scope, allowed: false, rule: 'membership-unavailable', membership };
    case 'ok':
      return membership.teams.includes(parsed.teamId)
        ? { scope, allowed: true, rule: 'creator-member', membership }
        : { scope, allowed: false, rule: 'creator-not-member', membership };
  }
}

/**
 * Decides with a membership lookup injected by the caller. The lookup is
 * called at most once per evaluator, which is what "cached only within one
 * request" means: create one evaluator per request.
 */
export function createScopeEvaluator(
  session: SessionIdentity,
  lookup: (user: string) => Promise<MembershipAnswer>,
): (scope: ScopeName) => Promise<Decision> {
  let pending: Promise<MembershipAnswer> | undefined;
  return async (scope) => {
    if (!needsMembership(session, scope)) return canLoadScope(session, scope);
    pending ??= lookup(session.creator as string).catch(
      (err: unknown): MembershipAnswer => ({
        status: 'error',
        error: err instanceof Error ? err.message : String(err),
      }),
    );
    return canLoadScope(session, scope, await pending);
  };
}
