// What every route handler gets: the stores, the membership source, the audit
// sink and the options. One per control plane; no HTTP in it.

import { KnowledgeError } from '../core/errors.js';
import { CONTROL_PLANE_METRICS, decisionOutcome, type MetricsExposition, type MetricsRecorder } from '../core/metrics.js';
import { createScopeEvaluator, type Decision, type SessionIdentity } from '../core/session/policy.js';
import { ACCOUNT_SCOPE, teamScope, type ScopeName } from '../core/scope.js';
import type { CanLoadRefusal, ResourceKind } from '../core/wire.js';
import { notFoundMessage, errorResponse, type ApiResponse } from './http/api.js';
import { toAuditRecord, type AuditAction, type AuditSink } from './access/audit-log.js';
import type { DirectoryView } from './packs/pack-source.js';
import { teamDenialMessage } from './access/guidance.js';
import type { MembershipSource } from './access/membership.js';
import type { ResolvedOptions } from './options.js';
import type { PackStore } from '../store/pack-store.js';
import type { PlanWakeups } from './http/plan-wakeups.js';
import type { PrefetchSlots } from './http/prefetch-slots.js';
import type { SessionRecord, SessionState } from './state/session-state.js';

export interface RouteContext {
  readonly options: ResolvedOptions;
  readonly store: PackStore;
  readonly sessions: SessionState;
  readonly membership: MembershipSource;
  readonly directory: DirectoryView;
  readonly audit: AuditSink;
  /** Where routes and backends record metrics (core/metrics.ts names them all). */
  readonly metrics: MetricsRecorder;
  /** What `GET /metrics` answers. */
  readonly exposition: MetricsExposition;
  /** Wakes plan long-polls on changes; caps them per session. */
  readonly wakeups: PlanWakeups;
  /** Bounds the prefetch batches served at once; the rest are shed (503 + Retry-After). */
  readonly prefetchSlots: PrefetchSlots;
  /** The request being answered (the router sets it on its per-request copy); audit lines carry it. */
  readonly requestId?: string;
}

export function identityOf(session: SessionRecord): SessionIdentity {
  return { id: session.id, kind: session.kind, creator: session.creator, team: session.team };
}

/** The account and the session's bound team, if any: the scopes every plan holds and the manifest advertises. */
export function boundScopes(session: SessionRecord): ScopeName[] {
  return [ACCOUNT_SCOPE, ...(session.team !== undefined ? [teamScope(session.team)] : [])];
}

/**
 * One decider per request: membership is fetched at most once (the
 * per-request cache) and every decision is audited unless `quiet`. A caller
 * that needs the membership answer itself passes its own (memoised) source,
 * so the request still asks once.
 */
export function decider(ctx: RouteContext, session: SessionRecord, membership: MembershipSource = ctx.membership) {
  const evaluate = createScopeEvaluator(identityOf(session), (user) => membership.teamsOf(user));
  return {
    async decide(scope: ScopeName, action: AuditAction, quiet = false): Promise<Decision> {
      const decision = await evaluate(scope);
      if (!quiet) audit(ctx, session, action, decision);
      return decision;
    },
  };
}

export function audit(ctx: RouteContext, session: SessionRecord, action: AuditAction, decision: Decision): void {
  ctx.audit.append(toAuditRecord(new Date(ctx.options.now()).toISOString(), ctx.options.replicaId, session, action, decision, ctx.requestId));
  ctx.metrics.inc(CONTROL_PLANE_METRICS.decisions, { action, session_kind: session.kind, outcome: decisionOutcome(decision) });
}

/**
 * Why a denied request for `what` (a file path or a scope) is refused:
 * membership failure → membership_unavailable (fail closed); team session →
 * denied, with guidance; personal session → exactly the missing-file answer.
 */
export function denialOf(session: SessionRecord, decision: Decision, what: string, kind: ResourceKind = 'knowledge'): CanLoadRefusal {
  if (decision.rule === 'membership-unavailable') {
    return {
      code: 'membership_unavailable',
      message: `cannot decide whether this session may load ${decision.scope}: the membership source is unavailable; try again later`,
    };
  }
  if (session.kind === 'team') return { code: 'denied', message: teamDenialMessage(session.team, decision.scope, kind) };
  return { code: 'not_found', message: notFoundMessage(what) };
}

/** The HTTP answer to a denied request for `what`: 503, 403 or exactly the missing-file 404 (denialOf). */
export function denialResponse(session: SessionRecord, decision: Decision, what: string): ApiResponse {
  const { code, message } = denialOf(session, decision, what);
  return errorResponse(code, message);
}

export function assertNever(x: never): never {
  throw new KnowledgeError('internal', `unexpected value ${String(x)}`);
}
