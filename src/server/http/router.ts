// Routing and authentication: ApiRequest in, ApiResponse out, no node:http.
// Admin routes take the admin token (a runner token there is 403); runner
// routes take a runner token (the admin token there is 403); anything else
// is 401. Tokens are compared by sha256 in constant time. `GET /metrics` is
// an admin route (the Prometheus text; `--metrics-listen` serves it without
// a token on a separate address).

import { createHash, timingSafeEqual } from 'node:crypto';
import { KnowledgeError, isKnowledgeError } from '../../core/errors.js';
import { escapeForLog } from '../../core/text/escape-for-log.js';
import { errorResponse, fromError, jsonResponse, type ApiRequest, type ApiResponse } from './api.js';
import type { RouteContext } from '../context.js';
import { createSessionRoute, revokeSessionRoute } from './admin-routes.js';
import { batchRoute } from './batch-route.js';
import { explainRoute } from './explain-route.js';
import { planRoute } from './plan-route.js';
import { filesRoute, grantsRoute, manifestRoute, readRoute, reminderRoute, sessionView } from './runner-routes.js';
import type { SessionRecord } from '../state/session-state.js';

export type Handler = (req: ApiRequest) => Promise<ApiResponse>;

function bearer(header: string | undefined): string | null {
  const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? null;
}

function sha(text: string): Buffer {
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
    if (rawPath === '/healthz' && method === 'GET') return jsonResponse(200, { ok: true });
    if (rawPath === '/metrics' && method === 'GET') {
      await requireAdmin(req);
      return { status: 200, headers: { 'content-type': ctx.exposition.contentType }, body: await ctx.exposition.text() };
    }
    if (rawPath === '/v1/admin/sessions' && method === 'POST') {
      await requireAdmin(req);
      return createSessionRoute(ctx, req.body);
    }
    if (rawPath.startsWith('/v1/admin/sessions/') && method === 'DELETE') {
      await requireAdmin(req);
      return revokeSessionRoute(ctx, rawPath.slice('/v1/admin/sessions/'.length));
    }
    if (rawPath === '/v1/admin/explain' && method === 'GET') {
      await requireAdmin(req);
      return explainRoute(ctx, req);
    }
    if (rawPath.startsWith('/v1/admin/')) {
      await requireAdmin(req);
      return errorResponse('not_found', `no route ${method} ${rawPath}`);
    }
    if (!rawPath.startsWith('/v1/')) return errorResponse('not_found', `no route ${method} ${rawPath}`);
    const session = await requireRunner(req);
    if (method === 'GET' && rawPath === '/v1/session') return jsonResponse(200, sessionView(session));
    if (method === 'GET' && rawPath === '/v1/plan') return planRoute(ctx, session, req);
    if (method === 'GET' && rawPath.startsWith('/v1/files/')) return filesRoute(ctx, session, rawPath.slice('/v1/files/'.length), req.query.get('sha256'));
    if (method === 'GET' && rawPath.startsWith('/v1/grants/')) return grantsRoute(ctx, session, rawPath.slice('/v1/grants/'.length));
    if (method === 'POST' && rawPath === '/v1/batch') return batchRoute(ctx, session, req);
    if (method === 'POST' && rawPath === '/v1/read') return readRoute(ctx, session, req);
    if (method === 'GET' && rawPath === '/v1/manifest') return manifestRoute(ctx, session);
    if (method === 'GET' && rawPath === '/v1/reminder') return reminderRoute(ctx, session, req);
    return errorResponse('not_found', `no route ${method} ${rawPath}`);
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
