// Admin routes: create and revoke sessions. A session names a known creator
// (in directory.json, or known to the membership service) and, for a team
// session, a known team (listed in directory.json or with a pack on disk).
//
// A personal session acts for its creator, so it may only be bound to one of
// the creator's teams (the bound team is always loadable through it: binding
// any other team would hand the creator a team they are not in). A team
// session acts for its team, not for its creator: the creator is recorded
// for the audit log and its memberships are never consulted.

import { KnowledgeError } from '../../core/errors.js';
import { escapeForLog } from '../../core/text/escape-for-log.js';
import type { SessionKind } from '../../core/session/policy.js';
import { isValidTeamId, teamScope } from '../../core/scope.js';
import { userNameError } from '../../core/user-name.js';
import type { CreateSessionRequest, CreateSessionResponse } from '../../core/wire.js';
import { empty, errorResponse, jsonResponse, type ApiResponse } from './api.js';
import type { RouteContext } from '../context.js';

function bad(message: string): never {
  throw new KnowledgeError('invalid_argument', message);
}

function parseCreate(body: Buffer): CreateSessionRequest {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    bad('request body must be JSON like {"kind": "team", "creator": "alice", "team": "payments"}');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad('request body must be a JSON object');
  const v = value as Record<string, unknown>;
  const kind = v['kind'];
  if (kind !== 'team' && kind !== 'personal') bad('"kind" must be "team" or "personal"');
  const creator = v['creator'];
  if (typeof creator !== 'string' || creator === '') bad('"creator" must be a user name');
  const creatorError = userNameError('creator', creator);
  if (creatorError !== undefined) bad(creatorError);
  const team = v['team'];
  if (team !== undefined && team !== null && (typeof team !== 'string' || !isValidTeamId(team))) {
    bad(`"team" must be a team id ([a-z0-9][a-z0-9_-]{0,62}), got ${JSON.stringify(team)}`);
  }
  if (kind === 'team' && (team === undefined || team === null)) bad('a team session needs "team"');
  return { kind: kind as SessionKind, creator: creator as string, ...(typeof team === 'string' ? { team } : {}) };
}

export async function createSessionRoute(ctx: RouteContext, body: Buffer): Promise<ApiResponse> {
  const request = parseCreate(body);
  if (request.team !== undefined) {
    const known = ctx.directory.directory.teams.has(request.team) || ctx.store.snapshot(teamScope(request.team)) !== undefined;
    if (!known) bad(`unknown team "${request.team}" (not in directory.json and no pack at teams/${request.team}/)`);
  }
  const answer = await ctx.membership.teamsOf(request.creator);
  if (answer.status === 'unknown-user') bad(`unknown user "${request.creator}"`);
  if (answer.status === 'error') {
    return errorResponse('membership_unavailable', `cannot check user "${request.creator}": ${answer.error}`);
  }
  if (request.kind === 'personal' && request.team !== undefined && !answer.teams.includes(request.team)) {
    bad(
      `user "${request.creator}" is not a member of team "${request.team}": a personal session can only be bound to one of its creator's teams ` +
        `(${answer.teams.length > 0 ? answer.teams.join(', ') : 'none'}); create a team session for ${request.team} instead`,
    );
  }
  const { record, token } = await ctx.sessions.create(request, new Date(ctx.options.now()).toISOString());
  const response: CreateSessionResponse = {
    sessionId: record.id,
    token,
    kind: record.kind,
    creator: record.creator,
    // Stryker disable next-line ConditionalExpression: JSON leaves out a team that is undefined
    ...(record.team !== undefined ? { team: record.team } : {}),
  };
  ctx.options.log(`session ${record.id} created (${record.kind}, creator ${escapeForLog(record.creator)}${record.team !== undefined ? `, team ${record.team}` : ''}; request ${ctx.requestId ?? '-'})`, { session: record.id, requestId: ctx.requestId });
  return jsonResponse(201, response);
}

export async function revokeSessionRoute(ctx: RouteContext, rawId: string): Promise<ApiResponse> {
  let id: string;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    bad('invalid session id');
  }
  if (!(await ctx.sessions.revoke(id))) return errorResponse('not_found', `no such session: ${id}`);
  ctx.options.log(`session ${escapeForLog(id)} revoked (request ${ctx.requestId ?? '-'})`, { session: id, requestId: ctx.requestId });
  return empty(204);
}
