// Runner routes other than the plan: session view, file bytes, grants, the
// read tool's read/mount, manifest and reminder.
//
// Order is the security property: parse and validate the path, decide
// CanLoadScope, and only then touch the pack store. A denied request never
// reaches the store, so its answer cannot depend on what the store holds.

import { KnowledgeError } from '../../core/errors.js';
import { buildManifest } from '../../core/session/manifest.js';
import { findFile } from '../../core/session/plan.js';
import { readPage } from '../../core/read-page.js';
import { buildReminder, isValidDate } from '../../core/session/reminder.js';
import { DUTY_FILE, parseScope, teamScope } from '../../core/scope.js';
import { isSha256 } from '../../core/sha256.js';
import { READ_OUTPUT_CAP, SHA256_HEADER, type GrantResponse, type ManifestResponse, type ReadRequest, type ReadResponse, type ReminderResponse, type SessionView } from '../../core/wire.js';
import { jsonResponse, notFound, parseEncodedScopePath, parseScopePath, errorResponse, type ApiRequest, type ApiResponse } from './api.js';
import { boundScopes, decider, denialResponse, type RouteContext } from '../context.js';
import type { SessionRecord } from '../state/session-state.js';

export function sessionView(session: SessionRecord): SessionView {
  return {
    sessionId: session.id,
    kind: session.kind,
    creator: session.creator,
    ...(session.team !== undefined ? { team: session.team } : {}),
    mounted: [...session.mounted],
  };
}

export async function filesRoute(ctx: RouteContext, session: SessionRecord, rest: string, version: string | null = null): Promise<ApiResponse> {
  const { scope, path } = parseEncodedScopePath(rest, true);
  if (version !== null && !isSha256(version)) {
    throw new KnowledgeError('invalid_argument', `sha256 must be 64 lowercase hex digits, got "${(version as string).slice(0, 80)}"`);
  }
  const what = `${scope}/${path}`;
  const decision = await decider(ctx, session).decide(scope, 'open');
  if (!decision.allowed) return denialResponse(session, decision, what);
  const file = await ctx.store.read(scope, path, version ?? undefined);
  if (file === null) return notFound(what);
  return {
    status: 200,
    headers: { 'content-type': 'application/octet-stream', [SHA256_HEADER]: file.sha256 },
    body: file.bytes,
  };
}

export async function grantsRoute(ctx: RouteContext, session: SessionRecord, rest: string): Promise<ApiResponse> {
  const { scope } = parseEncodedScopePath(rest, false);
  const decision = await decider(ctx, session).decide(scope, 'open');
  if (!decision.allowed) return denialResponse(session, decision, scope);
  const body: GrantResponse = { scope, allowed: true };
  return jsonResponse(200, body);
}

function parseReadRequest(body: Buffer): ReadRequest {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new KnowledgeError('invalid_argument', 'request body must be JSON like {"path": "team_x/DUTY.md", "mount": true}');
  }
  const v = value as Partial<Record<keyof ReadRequest, unknown>> | null;
  if (typeof v !== 'object' || v === null || typeof v.path !== 'string') {
    throw new KnowledgeError('invalid_argument', '"path" must be a string like "team_x/DUTY.md"');
  }
  if (v.mount !== undefined && typeof v.mount !== 'boolean') throw new KnowledgeError('invalid_argument', '"mount" must be true or false');
  const offset = pageCount('offset', v.offset, 0);
  const limit = pageCount('limit', v.limit, 1);
  if (offset !== undefined && limit === undefined) throw new KnowledgeError('invalid_argument', '"offset" needs "limit" (a page is asked for with both)');
  return { path: v.path, mount: v.mount === true, ...(limit !== undefined ? { offset: offset ?? 0, limit: Math.min(limit, READ_OUTPUT_CAP) } : {}) };
}

function pageCount(name: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new KnowledgeError('invalid_argument', `"${name}" must be an integer ≥ ${min} (characters)`);
  }
  return value;
}

export async function readRoute(ctx: RouteContext, session: SessionRecord, req: ApiRequest): Promise<ApiResponse> {
  const request = parseReadRequest(req.body);
  const { scope, path } = parseScopePath(request.path);
  const what = `${scope}/${path}`;
  const parsed = parseScope(scope);
  const mountTeam =
    request.mount && parsed?.kind === 'team' && parsed.teamId !== session.team && !session.mounted.includes(parsed.teamId)
      ? parsed.teamId
      : null;
  const decision = await decider(ctx, session).decide(scope, mountTeam !== null ? 'mount' : 'read');
  if (!decision.allowed) return denialResponse(session, decision, what);
  // Small files synchronously: one awaited fs call costs more than reading one.
  const small = ctx.store.readSmallSync?.(scope, path);
  const file = small !== undefined ? small : await ctx.store.read(scope, path);
  if (file === null) return notFound(what);
  const mounted = await ctx.sessions.recordRead(session, { path: what, sha256: file.sha256 }, mountTeam);
  // A page when one is asked for: the whole file would cross the wire for every page (56 MB of base64 for 40 MiB).
  const body: ReadResponse = {
    path: what,
    sha256: file.sha256,
    size: file.size,
    ...(request.limit !== undefined ? { page: readPage(file.bytes, request.offset ?? 0, request.limit) } : { contentBase64: file.bytes.toString('base64') }),
    mounted,
  };
  return jsonResponse(200, body);
}

async function duty(ctx: RouteContext, scope: string): Promise<string | null> {
  const file = await ctx.store.read(scope, DUTY_FILE);
  return file === null ? null : file.bytes.toString('utf8');
}

export async function manifestRoute(ctx: RouteContext, session: SessionRecord): Promise<ApiResponse> {
  const { decide } = decider(ctx, session);
  const advertised = boundScopes(session);
  const scopes: { scope: string; duty: string | null }[] = [];
  for (const scope of advertised) {
    if ((await decide(scope, 'manifest')).allowed) scopes.push({ scope, duty: await duty(ctx, scope) });
  }
  const mounted: { scope: string; duty: string | null }[] = [];
  for (const team of session.mounted) {
    const scope = teamScope(team);
    if (advertised.includes(scope)) continue;
    if ((await decide(scope, 'manifest')).allowed) mounted.push({ scope, duty: await duty(ctx, scope) });
  }
  const manifest: ManifestResponse = buildManifest({ scopes, mounted });
  return jsonResponse(200, { text: manifest.text, sha256: manifest.sha256 } satisfies ManifestResponse);
}

export async function reminderRoute(ctx: RouteContext, session: SessionRecord, req: ApiRequest): Promise<ApiResponse> {
  const today = req.query.get('today');
  if (today !== null && !isValidDate(today)) {
    return errorResponse('invalid_argument', `today must be a date like 2025-01-31, got "${today}"`);
  }
  const date = today ?? new Date(ctx.options.now()).toISOString().slice(0, 10);
  const { decide } = decider(ctx, session);
  // Per scope: loadable, not loadable, or unknown (the membership source failed: an outage, not a denial).
  const loadable = new Map<string, boolean | 'unknown'>();
  for (const entry of session.readSet) {
    const scope = entry.path.slice(0, entry.path.indexOf('/'));
    if (loadable.has(scope)) continue;
    const decision = await decide(scope, 'reminder');
    loadable.set(scope, decision.allowed ? true : decision.rule === 'membership-unavailable' ? 'unknown' : false);
  }
  const reminder = buildReminder({
    date,
    readSet: session.readSet.map((e) => ({ ...e })),
    current: (p) => {
      const slash = p.indexOf('/');
      const scope = p.slice(0, slash);
      const state = loadable.get(scope);
      if (state === 'unknown') return undefined;
      if (state !== true) return null;
      return findFile(ctx.store.snapshot(scope), p.slice(slash + 1))?.sha256 ?? null;
    },
  });
  await ctx.sessions.replaceReadSet(session, reminder.nextReadSet);
  const body: ReminderResponse = { text: reminder.text, date, changed: reminder.changed, deleted: reminder.deleted };
  return jsonResponse(200, body);
}
