// GET /v1/plan: the scopes a session's mount materialises.
//
// Loadable = account + every team CanLoadScope allows (bound team; for
// personal sessions the creator's teams that have packs; mounted teams only
// while still allowed). ETag is `"<plan.version>"`; a matching If-None-Match
// is 304, held up to `wait` seconds (long-poll) and answered 200 as soon as
// the plan changes. A waiting long-poll recomputes its plan when woken by a
// change (plan-wakeups.ts) and every --membership-recheck; the membership
// service is asked at most once per --membership-recheck per long-poll, and a
// session holds at most --max-long-polls at once (429 beyond). So one session
// causes at most max-long-polls × (1 + wait / membership-recheck) lookups per
// wait, and a revoked membership reaches a waiting plan within one re-check
// (directory.json's memberships are not kept: a rescan that changes them wakes
// the long-poll, which sees them at once). A session revoked while its
// long-poll waits gets 401 at once.
// Decisions are audited when a plan is handed out (200);
// 304s hand nothing out and write nothing, which keeps polling cheap.
// Scope JSON is cached per snapshot so large plans are not re-serialized for
// every runner.
//
// `known=scope:version-prefix,…` names the scopes the daemon already holds:
// each of them still at that version is sent as a stub without files
// (`"unchanged": true`), so a plan that changed in one scope (a new mount, an
// edit) costs that scope, not the whole plan. Nothing else depends on it: the
// version, ETag and long-poll are the full plan's.
//
// `form=columns` sends each scope's files as columns (plan-columns.ts): no
// keys to parse and no object per file; anything else gets rows unless it
// asks. A request whose Accept names PACKED_PLAN_TYPE gets the packed form
// instead (plan-packed.ts), whatever its `form`: the mount daemon asks for
// both, so a control plane that predates the packed form answers columns,
// and one that predates columns answers rows.

import { KnowledgeError } from '../../core/errors.js';
import { CONTROL_PLANE_METRICS } from '../../core/metrics.js';
import type { ErrorBody } from '../../core/wire.js';
import type { Decision } from '../../core/session/policy.js';
import { buildPlan, KNOWN_VERSION_PREFIX, snapshotScope, type Plan, type ScopeSnapshot, type UnchangedScope } from '../../core/session/plan.js';
import { columnarScope, PLAN_FORM_COLUMNS } from '../../core/session/plan-columns.js';
import { PACKED_PLAN_TYPE, packedPlanPrefix, packScope, type PackedScope } from '../../core/session/plan-packed.js';
import { parseScope, teamScope } from '../../core/scope.js';
import { empty, jsonResponse, rawJsonResponse, type ApiRequest, type ApiResponse } from './api.js';
import { audit, boundScopes, decider, type RouteContext } from '../context.js';
import { recheckedMembership, type MembershipSource } from '../access/membership.js';
import type { SessionRecord } from '../state/session-state.js';

export const DEFAULT_PLAN_THRESHOLD = 256 * 1024 * 1024;

export type PlanForm = 'rows' | typeof PLAN_FORM_COLUMNS;

// A scope's JSON, encoded once per snapshot and form: a 100 000-file plan is
// 16 MB, and building and encoding it again for every runner cost more than
// the rest of the request.
const scopeJson: Record<PlanForm, WeakMap<ScopeSnapshot, Buffer>> = { rows: new WeakMap(), columns: new WeakMap() };
const COMMA = Buffer.from(',');
const PLAN_END = Buffer.from(']}');

/** What `make` gives for a snapshot, made once per snapshot. */
function once<T>(cache: WeakMap<ScopeSnapshot, T>, s: ScopeSnapshot, make: (s: ScopeSnapshot) => T): T {
  let made = cache.get(s);
  if (made === undefined) {
    made = make(s);
    cache.set(s, made);
  }
  return made;
}

function encodeScope(s: ScopeSnapshot, form: PlanForm): Buffer {
  return once(scopeJson[form], s, () => Buffer.from(JSON.stringify(form === PLAN_FORM_COLUMNS ? columnarScope(s) : s)));
}

const packedScopes = new WeakMap<ScopeSnapshot, PackedScope>();

const planHead = (plan: Plan) => ({ sessionId: plan.sessionId, version: plan.version, threshold: plan.threshold, mode: plan.mode, mounted: plan.mounted });

/** The stub a scope the client holds at this version is sent as, or undefined when it must be sent whole. */
function stubFor(s: ScopeSnapshot, known: ReadonlyMap<string, string>): UnchangedScope | undefined {
  const prefix = known.get(s.scope);
  if (prefix === undefined || !s.version.startsWith(prefix)) return undefined;
  return { scope: s.scope, version: s.version, totalBytes: s.totalBytes, unchanged: true };
}

/** The plan's JSON as pieces sent one after another (no 16 MB copy per answer). */
function serializePlan(plan: Plan, known: ReadonlyMap<string, string>, form: PlanForm): Buffer[] {
  const head = JSON.stringify(planHead(plan));
  const parts: Buffer[] = [Buffer.from(`${head.slice(0, -1)},"scopes":[`)];
  for (const s of plan.scopes) {
    if (parts.length > 1) parts.push(COMMA);
    const stub = stubFor(s, known);
    parts.push(stub === undefined ? encodeScope(s, form) : Buffer.from(JSON.stringify(stub)));
  }
  parts.push(PLAN_END);
  return parts;
}

/** The packed plan as pieces: its header, then the sections of each scope sent whole, each packed once per snapshot. */
export function serializePackedPlan(plan: Plan, known: ReadonlyMap<string, string> = new Map()): Buffer[] {
  const scopes: unknown[] = [];
  const sections: Buffer[] = [];
  for (const s of plan.scopes) {
    const stub = stubFor(s, known);
    if (stub !== undefined) {
      scopes.push(stub);
      continue;
    }
    const packed = once(packedScopes, s, packScope);
    scopes.push(packed.head);
    sections.push(packed.sections);
  }
  return [packedPlanPrefix(JSON.stringify({ ...planHead(plan), scopes })), ...sections];
}

/** Whether an Accept header names the packed form (with a q above 0). */
export function acceptsPackedPlan(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((item) => {
    const [type, ...params] = item.split(';').map((p) => p.trim().toLowerCase());
    if (type !== PACKED_PLAN_TYPE) return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

export async function computePlan(
  ctx: RouteContext,
  session: SessionRecord,
  threshold: number,
  membership?: MembershipSource,
): Promise<{ plan: Plan; decisions: Decision[] }> {
  const { decide } = decider(ctx, session, membership);
  const candidates = new Map<string, ScopeSnapshot>();
  for (const s of ctx.store.scopes()) candidates.set(s.scope, s);
  // Account and the bound team are always in a plan, empty when they have no pack yet.
  for (const scope of boundScopes(session)) if (!candidates.has(scope)) candidates.set(scope, snapshotScope(scope, []));
  for (const team of session.mounted) {
    const scope = teamScope(team);
    if (!candidates.has(scope)) candidates.set(scope, snapshotScope(scope, []));
  }
  const decisions: Decision[] = [];
  const loadable: ScopeSnapshot[] = [];
  const allowed = new Set<string>();
  for (const [scope, snapshot] of candidates) {
    // Stryker disable next-line StringLiteral: quiet, so not audited: the action is recorded nowhere
    const d = await decide(scope, 'plan', true);
    decisions.push(d);
    if (!d.allowed) continue;
    allowed.add(scope);
    loadable.push(snapshot);
  }
  const mounted = session.mounted.filter((t) => allowed.has(teamScope(t)));
  const plan = buildPlan({ sessionId: session.id, threshold, loadable, boundTeam: session.team, mounted });
  return { plan, decisions };
}

export function parseThreshold(text: string | null): number {
  if (text === null) return DEFAULT_PLAN_THRESHOLD;
  if (!/^\d{1,16}$/.test(text)) throw new KnowledgeError('invalid_argument', `threshold must be a number of bytes, got "${text}"`);
  return Number(text);
}

export function parsePlanForm(text: string | null): PlanForm {
  if (text === null || text === 'rows') return 'rows';
  if (text === PLAN_FORM_COLUMNS) return PLAN_FORM_COLUMNS;
  throw new KnowledgeError('invalid_argument', `form must be "rows" or "${PLAN_FORM_COLUMNS}", got "${text.slice(0, 100)}"`);
}

function parseWait(text: string | null, maxMs: number): number {
  if (text === null) return 0;
  if (!/^\d+(\.\d+)?$/.test(text)) throw new KnowledgeError('invalid_argument', `wait must be a number of seconds, got "${text}"`);
  return Math.min(Number(text) * 1000, maxMs);
}

const KNOWN_ENTRY = new RegExp(`^([^:]+):([0-9a-f]{${KNOWN_VERSION_PREFIX},64})$`);

/** `known=` → scope → version prefix. */
function parseKnown(text: string | null): Map<string, string> {
  const known = new Map<string, string>();
  if (text === null || text === '') return known;
  for (const item of text.split(',')) {
    const m = KNOWN_ENTRY.exec(item);
    if (m === null || parseScope(m[1] as string) === null) {
      throw new KnowledgeError('invalid_argument', `known must list scope:version pairs like "account:${'0'.repeat(KNOWN_VERSION_PREFIX)}" (at least ${KNOWN_VERSION_PREFIX} hex digits), got "${item.slice(0, 100)}"`);
    }
    known.set(m[1] as string, m[2] as string);
  }
  return known;
}

function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === etag || tag === '*';
  });
}

export async function planRoute(ctx: RouteContext, session: SessionRecord, req: ApiRequest): Promise<ApiResponse> {
  const threshold = parseThreshold(req.query.get('threshold'));
  const waitMs = parseWait(req.query.get('wait'), ctx.options.maxWaitMs);
  const known = parseKnown(req.query.get('known'));
  const form = parsePlanForm(req.query.get('form'));
  const packed = acceptsPackedPlan(req.accept);
  // A request that may wait holds a long-poll from before its first plan, so no change in between is missed.
  const poll = waitMs > 0 && req.ifNoneMatch !== undefined ? ctx.wakeups.begin(session.id) : undefined;
  if (poll === null) {
    // 429 (not 503): the control plane is fine, this session asks too much at once; `unavailable` says "try again later".
    const message = `this session already holds ${ctx.options.maxLongPollsPerSession} plan long-polls (--max-long-polls); wait for one to end`;
    return jsonResponse(429, { error: { code: 'unavailable', message } } satisfies ErrorBody, { 'retry-after': '1' });
  }
  try {
    const recheckMs = ctx.options.membershipRecheckMs;
    // Only an external service's answers are kept for a re-check: directory.json's are in memory, and a rescan that
    // changed them wakes this long-poll, which must then see them (a creator removed from a team, at once).
    const membership = ctx.options.membershipUrl === undefined ? ctx.membership : recheckedMembership(ctx.membership, recheckMs, ctx.options.now);
    let mark = poll?.mark();
    let { plan, decisions } = await computePlan(ctx, session, threshold, membership);
    let etag = `"${plan.version}"`;
    if (etagMatches(req.ifNoneMatch, etag)) {
      const deadline = Date.now() + waitMs;
      let unchanged = true;
      if (poll !== undefined) ctx.metrics.add(CONTROL_PLANE_METRICS.planLongPolls, {}, 1);
      try {
        while (poll !== undefined && mark !== undefined && unchanged && Date.now() < deadline && !req.signal.aborted && !session.revoked) {
          await poll.wait(mark, Math.min(recheckMs, Math.max(1, deadline - Date.now())), req.signal);
          if (req.signal.aborted) break; // client gone or server closing
          mark = poll.mark();
          ({ plan, decisions } = await computePlan(ctx, session, threshold, membership));
          etag = `"${plan.version}"`;
          unchanged = etagMatches(req.ifNoneMatch, etag);
        }
      } finally {
        if (poll !== undefined) ctx.metrics.add(CONTROL_PLANE_METRICS.planLongPolls, {}, -1);
      }
      // A session revoked while its long-poll waited: 401 now, so the mount empties at once rather than at its next poll.
      if (session.revoked) throw new KnowledgeError('unauthorized', 'missing, invalid or revoked session token (Authorization: Bearer <token>)');
      if (unchanged) return empty(304, { etag, 'cache-control': 'no-cache', vary: 'accept' });
    }
    // The same URL answers JSON or the packed form by Accept: a cache must keep them apart.
    const headers = { etag, 'cache-control': 'no-cache', vary: 'accept' };
    for (const d of decisions) audit(ctx, session, 'plan', d);
    if (packed) return { status: 200, headers: { 'content-type': PACKED_PLAN_TYPE, ...headers }, body: serializePackedPlan(plan, known) };
    return rawJsonResponse(200, serializePlan(plan, known, form), headers);
  } finally {
    poll?.end();
  }
}
