// GET /v1/admin/explain?session=ID[&path=<scope>/<path>][&threshold=N]: for
// one session, what it is told (advertised), what its mount shows
// (materialised at `threshold`), what it may load, and why, from the same
// code the runner routes use: computePlan for the plan, the decider for each
// CanLoadScope decision, denialResponse for what a read would answer.
//
// It reveals memberships, so it is an admin route (a runner token is 403).
// It is a decision like any other: each scope decided here is audited with
// action "explain". With the decision log in PostgreSQL it also shows the
// session's last decisions from every replica. The creator's memberships are asked once and that one
// answer serves every decision of the request, as on the runner routes.

import { KnowledgeError } from '../../core/errors.js';
import { decisionOutcome } from '../../core/metrics.js';
import { findFile } from '../../core/session/plan.js';
import type { Decision, MembershipAnswer } from '../../core/session/policy.js';
import { ACCOUNT_SCOPE, TEAM_PREFIX, teamScope } from '../../core/scope.js';
import type { ExplainDecision, ExplainPath, ExplainReadEntry, ExplainResponse, ExplainScope } from '../../core/wire.js';
import { bodyParts, errorResponse, jsonResponse, notFound, parseScopePath, type ApiRequest, type ApiResponse } from './api.js';
import { audit, boundScopes, decider, denialResponse, type RouteContext } from '../context.js';
import { computePlan, parseThreshold } from './plan-route.js';
import type { SessionRecord } from '../state/session-state.js';

function teamOf(scope: string): string {
  return scope.startsWith(TEAM_PREFIX) ? scope.slice(TEAM_PREFIX.length) : scope;
}

function listOf(teams: readonly string[]): string {
  return teams.length === 0 ? 'no teams' : teams.join(', ');
}

/** One sentence per rule, naming what the rule looked at. */
export function whyOf(session: SessionRecord, decision: Decision): string {
  const team = teamOf(decision.scope);
  const m = decision.membership;
  switch (decision.rule) {
    case 'account':
      return 'the account scope is open to every session';
    case 'bound-team':
      return `the session is bound to team ${team}`;
    case 'team-session-other-team':
      return `a team session of team ${session.team ?? '?'} loads only its own team and the account, with no exception for any role`;
    case 'creator-member':
      return `creator ${session.creator} is a member of team ${team} now`;
    case 'creator-not-member':
      return `creator ${session.creator} is not a member of team ${team} (member of ${m?.status === 'ok' ? listOf(m.teams) : 'unknown'})`;
    case 'creator-unknown':
      return `the membership source does not know creator ${session.creator}`;
    case 'membership-unavailable':
      return `the membership source failed (${m?.status === 'error' ? m.error : 'no answer'}): denied, fail closed`;
    case 'invalid-scope':
      return `"${decision.scope}" is not a scope name`;
  }
}

function explained(session: SessionRecord, decision: Decision): ExplainDecision {
  return { allowed: decision.allowed, rule: decision.rule, outcome: decisionOutcome(decision), why: whyOf(session, decision) };
}

function readAnswerOf(response: ApiResponse): ExplainPath['readAnswer'] {
  const body = JSON.parse(Buffer.concat(bodyParts(response.body)).toString('utf8')) as { error?: { code?: string; message?: string } };
  return { status: response.status, code: body.error?.code ?? null, message: body.error?.message ?? null };
}

/** How many of the session's last decisions explain shows. */
export const RECENT_DECISIONS = 20;

async function recentDecisions(ctx: RouteContext, session: string): Promise<NonNullable<ExplainResponse['recentDecisions']>> {
  try {
    const records = (await ctx.audit.recent?.(session, RECENT_DECISIONS)) ?? [];
    return {
      decisions: records.map((r) => ({ time: r.time, replica: r.replica, action: r.action, scope: r.scope, result: r.result, rule: r.rule, requestId: r.requestId })),
      error: null,
    };
  } catch (err) {
    return { decisions: [], error: `the decision log could not be read: ${err instanceof Error ? err.message : String(err)}` };
  }
}

export async function explainRoute(ctx: RouteContext, req: ApiRequest): Promise<ApiResponse> {
  const id = req.query.get('session');
  if (id === null || id === '') throw new KnowledgeError('invalid_argument', 'explain needs ?session=<session id>');
  const pathText = req.query.get('path');
  const asked = pathText === null ? null : parseScopePath(pathText);
  const threshold = parseThreshold(req.query.get('threshold'));
  const session = await ctx.sessions.find(id);
  if (session === undefined) return errorResponse('not_found', `no such session: ${id}`);

  // One membership answer for the whole request (and for the report).
  let answer: Promise<MembershipAnswer> | undefined;
  const lookup = (user: string): Promise<MembershipAnswer> =>
    (answer ??= ctx.membership.teamsOf(user).catch((err: unknown) => ({ status: 'error', error: err instanceof Error ? err.message : String(err) })));
  const membership = await lookup(session.creator);

  const once = { teamsOf: lookup };
  const { plan, decisions } = await computePlan(ctx, session, threshold, once);
  const byScope = new Map(decisions.map((d) => [d.scope, d]));
  const { decide } = decider(ctx, session, once);
  // The path's scope and the read set's are decided too when no pack made them plan candidates.
  const alsoTouched = [...(asked !== null ? [asked.scope] : []), ...session.readSet.map((e) => e.path.slice(0, e.path.indexOf('/')))];
  for (const scope of alsoTouched) if (!byScope.has(scope)) byScope.set(scope, await decide(scope, 'explain', true));
  for (const d of byScope.values()) audit(ctx, session, 'explain', d);

  const materialised = new Set(plan.scopes.map((s) => s.scope));
  const advertisedCandidates = new Set([...boundScopes(session), ...session.mounted.map(teamScope)]);
  const scopes: ExplainScope[] = [...byScope.values()]
    .sort((a, b) => (a.scope === ACCOUNT_SCOPE ? -1 : b.scope === ACCOUNT_SCOPE ? 1 : a.scope.localeCompare(b.scope)))
    .map((d) => {
      const snapshot = ctx.store.snapshot(d.scope);
      return {
        scope: d.scope,
        version: snapshot?.version ?? null,
        files: snapshot?.files.length ?? 0,
        totalBytes: snapshot?.totalBytes ?? 0,
        advertised: d.allowed && advertisedCandidates.has(d.scope),
        materialised: materialised.has(d.scope),
        loadable: d.allowed,
        mounted: d.scope !== ACCOUNT_SCOPE && session.mounted.includes(teamOf(d.scope)),
        decision: explained(session, d),
      };
    });

  const readSet: ExplainReadEntry[] = session.readSet.map((entry) => {
    const slash = entry.path.indexOf('/');
    const scope = entry.path.slice(0, slash);
    if (byScope.get(scope)?.allowed !== true) return { path: entry.path, readSha256: entry.sha256, currentSha256: null, state: 'not-loadable' };
    const current = findFile(ctx.store.snapshot(scope), entry.path.slice(slash + 1))?.sha256 ?? null;
    return { path: entry.path, readSha256: entry.sha256, currentSha256: current, state: current === null ? 'deleted' : current === entry.sha256 ? 'unchanged' : 'changed' };
  });

  let path: ExplainPath | undefined;
  if (asked !== null) {
    const decision = byScope.get(asked.scope) as Decision;
    const what = `${asked.scope}/${asked.path}`;
    // Like a read: the store is looked at only once the decision allows it.
    const file = decision.allowed ? findFile(ctx.store.snapshot(asked.scope), asked.path) : undefined;
    const answerOf = !decision.allowed
      ? readAnswerOf(denialResponse(session, decision, what))
      : file !== undefined
        ? { status: 200, code: null, message: null }
        : readAnswerOf(notFound(what));
    path = {
      path: what,
      scope: asked.scope,
      decision: explained(session, decision),
      exists: decision.allowed ? file !== undefined : null,
      sha256: file?.sha256 ?? null,
      size: file?.size ?? null,
      materialised: file !== undefined && materialised.has(asked.scope),
      readAnswer: answerOf,
    };
  }

  const body: ExplainResponse = {
    session: {
      id: session.id,
      kind: session.kind,
      creator: session.creator,
      team: session.team ?? null,
      revoked: session.revoked,
      createdAt: session.createdAt,
      mounted: [...session.mounted],
    },
    membership: {
      source: ctx.options.membershipUrl !== undefined ? 'http' : 'directory',
      status: membership.status,
      teams: membership.status === 'ok' ? [...membership.teams] : null,
      error: membership.status === 'error' ? membership.error : null,
    },
    threshold,
    mode: plan.mode,
    loadableBytes: [...byScope.values()].filter((d) => d.allowed).reduce((n, d) => n + (ctx.store.snapshot(d.scope)?.totalBytes ?? 0), 0),
    scopes,
    readSet,
    ...(path !== undefined ? { path } : {}),
    ...(ctx.audit.recent !== undefined ? { recentDecisions: await recentDecisions(ctx, session.id) } : {}),
  };
  return jsonResponse(200, body);
}
