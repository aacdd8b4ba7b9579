// Routing and authentication: ApiRequest in, ApiResponse out, no node:http.
// Admin routes take the admin token (a runner token there is 403); runner
// routes take a runner token (the admin token there is 403); anything else
// is 401. Tokens are compared by sha256 in constant time. `GET /metrics` is
// an admin route (the Prometheus text; `--metrics-listen` serves it without
// a token on a separate address). The route table (ROUTES) is the one list of
// routes: dispatch and the route template metrics count a request under
// (`httpRouteOf`, which the HTTP adapter calls) both read it.

import { createHash, timingSafeEqual } from 'node:crypto';
import { KnowledgeError, isKnowledgeError } from '../../core/errors.js';
import type { HttpRoute } from '../../core/metrics.js';
import { escapeForLog } from '../../core/text/escape-for-log.js';
import { errorResponse, fromError, jsonResponse, type ApiRequest, type ApiResponse } from './api.js';
import type { RouteContext } from '../context.js';
import { createSessionRoute, revokeSessionRoute } from './admin-routes.js';
import { batchRoute } from './batch-route.js';
import { explainRoute } from './explain-route.js';
import { planRoute } from './plan-route.js';
import { canLoadRoute } from './can-load-route.js';
import { filesRoute, grantsRoute, manifestRoute, readRoute, reminderRoute, sessionView } from './runner-routes.js';
import type { SessionRecord } from '../state/session-state.js';

export type Handler = (req: ApiRequest) => Promise<ApiResponse>;

interface RouteCall {
  readonly ctx: RouteContext;
  readonly req: ApiRequest;
  /** What follows a prefix route's path (`/v1/files/<rest>`); '' for an exact one. */
  readonly rest: string;
  /** The authenticated session (runner routes). */
  readonly session?: SessionRecord;
}

interface Route {
  /** The route template metrics count it under (`plan` becomes `plan_long_poll` with `?wait=`). */
  readonly name: Exclude<HttpRoute, 'other' | 'plan_long_poll'>;
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** The exact path, or a prefix when it ends in `/`. */
  readonly path: string;
  readonly auth: 'none' | 'admin' | 'runner';
  readonly handle: (call: RouteCall) => Promise<ApiResponse>;
}

const runner = (call: RouteCall): SessionRecord => call.session as SessionRecord;

/** Every route, once: the router dispatches on it and metrics name requests by it. */
const ROUTES: readonly Route[] = [
  { name: 'healthz', method: 'GET', path: '/healthz', auth: 'none', handle: async () => jsonResponse(200, { ok: true }) },
  {
    name: 'metrics',
    method: 'GET',
    path: '/metrics',
    auth: 'admin',
    handle: async ({ ctx }) => ({ status: 200, headers: { 'content-type': ctx.exposition.contentType }, body: await ctx.exposition.text() }),
  },
  { name: 'admin_session_create', method: 'POST', path: '/v1/admin/sessions', auth: 'admin', handle: ({ ctx, req }) => createSessionRoute(ctx, req.body) },
  { name: 'admin_session_revoke', method: 'DELETE', path: '/v1/admin/sessions/', auth: 'admin', handle: ({ ctx, rest }) => revokeSessionRoute(ctx, rest) },
  { name: 'admin_explain', method: 'GET', path: '/v1/admin/explain', auth: 'admin', handle: ({ ctx, req }) => explainRoute(ctx, req) },
  { name: 'session', method: 'GET', path: '/v1/session', auth: 'runner', handle: async (call) => jsonResponse(200, sessionView(runner(call))) },
  { name: 'plan', method: 'GET', path: '/v1/plan', auth: 'runner', handle: (call) => planRoute(call.ctx, runner(call), call.req) },
  { name: 'files', method: 'GET', path: '/v1/files/', auth: 'runner', handle: (call) => filesRoute(call.ctx, runner(call), call.rest, call.req.query.get('sha256')) },
  { name: 'grants', method: 'GET', path: '/v1/grants/', auth: 'runner', handle: (call) => grantsRoute(call.ctx, runner(call), call.rest) },
  { name: 'batch', method: 'POST', path: '/v1/batch', auth: 'runner', handle: (call) => batchRoute(call.ctx, runner(call), call.req) },
  { name: 'read', method: 'POST', path: '/v1/read', auth: 'runner', handle: (call) => readRoute(call.ctx, runner(call), call.req) },
  { name: 'can_load', method: 'POST', path: '/v1/can-load', auth: 'runner', handle: (call) => canLoadRoute(call.ctx, runner(call), call.req) },
  { name: 'manifest', method: 'GET', path: '/v1/manifest', auth: 'runner', handle: (call) => manifestRoute(call.ctx, runner(call)) },
  { name: 'reminder', method: 'GET', path: '/v1/reminder', auth: 'runner', handle: (call) => reminderRoute(call.ctx, runner(call), call.req) },
];

/** The route `method rawPath` is dispatched to (HEAD is answered as GET), and what follows a prefix route's path. */
function matchRoute(method: string, rawPath: string): { route: Route; rest: string } | undefined {
  const m = method === 'HEAD' ? 'GET' : method;
  for (const route of ROUTES) {
    if (route.method !== m) continue;
    if (route.path.endsWith('/') ? rawPath.startsWith(route.path) : rawPath === route.path) return { route, rest: rawPath.slice(route.path.length) };
  }
  return undefined;
}

/** The route template of a request, from its method and raw path (never the path itself): the route the router dispatches it to. */
export function httpRouteOf(method: string, rawPath: string, query: URLSearchParams): HttpRoute {
  const name = matchRoute(method, rawPath)?.route.name;
  if (name === undefined) return 'other';
  return name === 'plan' && query.has('wait') ? 'plan_long_poll' : name;
}

function bearer(header: string | undefined): string | null {
  const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? null;
}

function sha(text: string): Buffer {
  // Stryker disable next-line StringLiteral: an empty encoding name is UTF-8 too
  return createHash('sha256').update(text, 'utf8').digest();
}

export function createRouter(ctx: RouteContext): Handler {
  const adminHash = sha(ctx.options.adminToken);
  const isAdmin = (token: string | null): boolean => token !== null && timingSafeEqual(sha(token), adminHash);

  const requireAdmin = async (req: ApiRequest): Promise<void> => {
    const token = bearer(req.authorization);
    if (isAdmin(token)) return;
    if (token !== null && (await ctx.sessions.authenticate(token)) !== null) {
      throw new KnowledgeError('forbidden', 'this route needs the admin token; a runner token is not enough');
    }
    throw new KnowledgeError('unauthorized', 'missing or invalid admin token (Authorization: Bearer <admin token>)');
  };

  const requireRunner = async (req: ApiRequest): Promise<SessionRecord> => {
    const token = bearer(req.authorization);
    const session = token === null ? null : await ctx.sessions.authenticate(token);
    if (session !== null) return session;
    if (isAdmin(token)) throw new KnowledgeError('forbidden', 'runner routes need a session token, not the admin token');
    throw new KnowledgeError('unauthorized', 'missing, invalid or revoked session token (Authorization: Bearer <token>)');
  };

  // `ctx` here is the request's own copy, carrying its id to the audit lines.
  const route = async (req: ApiRequest, ctx: RouteContext): Promise<ApiResponse> => {
    const { method, rawPath } = req;
    const matched = matchRoute(method, rawPath);
    if (matched === undefined) {
      // Unrouted: under /v1/admin/ the admin token is checked first, under /v1/ a runner token, so a
      // 404 tells only an authenticated caller that there is no such route.
      if (rawPath.startsWith('/v1/admin/')) await requireAdmin(req);
      else if (rawPath.startsWith('/v1/')) await requireRunner(req);
      return errorResponse('not_found', `no route ${method} ${rawPath}`);
    }
    const { route: r, rest } = matched;
    // Stryker disable next-line ObjectLiteral: the one route without a token (/healthz) reads nothing of its call
    if (r.auth === 'none') return r.handle({ ctx, req, rest });
    if (r.auth === 'admin') {
      await requireAdmin(req);
      return r.handle({ ctx, req, rest });
    }
    return r.handle({ ctx, req, rest, session: await requireRunner(req) });
  };

  return async (req) => {
    try {
      return await route(req, { ...ctx, requestId: req.requestId });
    } catch (err) {
      if (isKnowledgeError(err)) return fromError(err);
      ctx.options.log(`internal error on ${req.method} ${escapeForLog(req.rawPath)} (request ${req.requestId}): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`, { level: 'error', requestId: req.requestId });
      return errorResponse('internal', 'internal error (logged by the control plane)');
    }
  };
}
