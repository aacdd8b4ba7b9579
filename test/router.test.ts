// The router in this process, over a stand-in context: which token each
// route takes (and the 401/403 for the wrong one), the bearer header's form,
// unrouted paths (a 404 only for an authenticated caller), HEAD as GET, an
// unexpected throw answered 500 and logged, and the route template each
// request is counted under.

import { describe, expect, it } from 'vitest';
import { HTTP_ROUTES } from '../src/core/metrics.js';
import type { ApiRequest, ApiResponse } from '../src/server/http/api.js';
import { createRouter, httpRouteOf } from '../src/server/http/router.js';
import type { RouteContext } from '../src/server/context.js';
import type { SessionRecord } from '../src/server/state/session-state.js';

const ADMIN = 'admin-token-0123456789abcdef';
const RUNNER = 'runner-token-abcdef';
const session: SessionRecord = { id: 's1', kind: 'team', creator: 'alice', team: 'payments', tokenHash: 'h', revoked: false, mounted: ['search'], readSet: [], createdAt: '2026-01-01T00:00:00.000Z' };

function routerOf(text: () => Promise<string> = async () => 'metric 1\n') {
  const logged: { line: string; meta: unknown }[] = [];
  const authenticated: string[] = [];
  const ctx = {
    options: { adminToken: ADMIN, log: (line: string, meta?: unknown) => void logged.push({ line, meta }) },
    sessions: {
      authenticate: async (token: string) => {
        authenticated.push(token);
        return token === RUNNER ? session : null;
      },
    },
    exposition: { contentType: 'text/plain; version=0.0.4', text },
  } as unknown as RouteContext;
  return { handle: createRouter(ctx), logged, authenticated };
}

function request(method: string, rawPath: string, authorization?: string): ApiRequest {
  return { method, rawPath, query: new URLSearchParams(), authorization, ifNoneMatch: undefined, body: Buffer.alloc(0), signal: new AbortController().signal, requestId: 'req-7' };
}

const errorOf = (res: ApiResponse) => (JSON.parse(res.body as string) as { error: { code: string; message: string } }).error;

describe('createRouter', () => {
  it('/healthz needs no token; HEAD is answered as GET', async () => {
    const { handle, authenticated } = routerOf();
    for (const method of ['GET', 'HEAD']) {
      const res = await handle(request(method, '/healthz'));
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body as string)).toEqual({ ok: true });
    }
    expect(authenticated).toEqual([]);
    expect((await handle(request('POST', '/healthz'))).status).toBe(404);
  });

  it('admin routes: the admin token; a runner token is 403, anything else 401', async () => {
    const { handle } = routerOf();
    const ok = await handle(request('GET', '/metrics', `Bearer ${ADMIN}`));
    expect(ok).toEqual({ status: 200, headers: { 'content-type': 'text/plain; version=0.0.4' }, body: 'metric 1\n' });
    const runner = await handle(request('GET', '/metrics', `Bearer ${RUNNER}`));
    expect(runner.status).toBe(403);
    expect(errorOf(runner)).toEqual({ code: 'forbidden', message: 'this route needs the admin token; a runner token is not enough' });
    for (const auth of [undefined, 'Bearer nope', `Basic ${ADMIN}`, ADMIN, `Bearer ${ADMIN}x`]) {
      const res = await handle(request('GET', '/metrics', auth));
      expect(res.status, String(auth)).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(errorOf(res)).toEqual({ code: 'unauthorized', message: 'missing or invalid admin token (Authorization: Bearer <admin token>)' });
    }
  });

  it('runner routes: a session token; the admin token is 403, anything else 401', async () => {
    const { handle } = routerOf();
    const ok = await handle(request('GET', '/v1/session', `Bearer ${RUNNER}`));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body as string)).toEqual({ sessionId: 's1', kind: 'team', creator: 'alice', team: 'payments', mounted: ['search'] });
    const admin = await handle(request('GET', '/v1/session', `Bearer ${ADMIN}`));
    expect(admin.status).toBe(403);
    expect(errorOf(admin)).toEqual({ code: 'forbidden', message: 'runner routes need a session token, not the admin token' });
    for (const auth of [undefined, '', 'Bearer', 'Bearer  ', `Bearer ${RUNNER} extra`, `Token ${RUNNER}`]) {
      const res = await handle(request('GET', '/v1/session', auth));
      expect(res.status, String(auth)).toBe(401);
      expect(errorOf(res)).toEqual({ code: 'unauthorized', message: 'missing, invalid or revoked session token (Authorization: Bearer <token>)' });
    }
  });

  it('each route takes exactly its token, and is answered by its handler', async () => {
    const { handle } = routerOf();
    const admin: [string, string][] = [['GET', '/metrics'], ['POST', '/v1/admin/sessions'], ['DELETE', '/v1/admin/sessions/abc'], ['GET', '/v1/admin/explain']];
    const runner: [string, string][] = [
      ['GET', '/v1/session'], ['GET', '/v1/plan'], ['GET', '/v1/files/account/a.md'], ['GET', '/v1/grants/account/a.md'], ['POST', '/v1/batch'],
      ['POST', '/v1/read'], ['POST', '/v1/can-load'], ['GET', '/v1/manifest'], ['GET', '/v1/reminder'],
    ];
    // Each route with the token it takes and the one it refuses.
    const cases = [...admin.map(([m, p]) => [m, p, ADMIN, RUNNER]), ...runner.map(([m, p]) => [m, p, RUNNER, ADMIN])] as [string, string, string, string][];
    for (const [method, path, right, wrong] of cases) {
      expect(errorOf(await handle(request(method, path, `Bearer ${wrong}`))).code, `${method} ${path}`).toBe('forbidden');
      expect((await handle(request(method, path))).status, `${method} ${path}`).toBe(401);
      // The stand-in context cannot serve these routes: any answer but a token refusal shows the handler ran.
      const res = await handle(request(method, path, `Bearer ${right}`));
      expect(res?.status, `${method} ${path}`).toBeDefined();
      expect([401, 403], `${method} ${path}`).not.toContain(res.status);
    }
  });

  it('no token is never looked up; an exact route is not a prefix', async () => {
    const { handle, authenticated } = routerOf();
    await handle(request('GET', '/metrics'));
    await handle(request('GET', '/v1/session'));
    await handle(request('GET', '/v1/admin/nothing'));
    expect(authenticated).toEqual([]);
    expect(errorOf(await handle(request('GET', '/v1/sessionx', `Bearer ${RUNNER}`)))).toEqual({ code: 'not_found', message: 'no route GET /v1/sessionx' });
    expect(errorOf(await handle(request('GET', '/healthz/x')))).toEqual({ code: 'not_found', message: 'no route GET /healthz/x' });
    expect((await handle(request('GET', `/v1/session`, `xBearer ${RUNNER}`))).status).toBe(401);
  });

  it('the scheme is case-insensitive and spaces around the token are allowed', async () => {
    const { handle, authenticated } = routerOf();
    for (const auth of [`bearer ${RUNNER}`, `BEARER   ${RUNNER}  `, `Bearer\t${RUNNER}`]) {
      expect((await handle(request('GET', '/v1/session', auth))).status, auth).toBe(200);
    }
    expect(authenticated).toEqual([RUNNER, RUNNER, RUNNER]);
    expect((await handle(request('GET', '/metrics', `bearer ${ADMIN} `))).status).toBe(200);
  });

  it('an unrouted path: under /v1/admin/ the admin token first, under /v1/ a session token, elsewhere a plain 404', async () => {
    const { handle } = routerOf();
    expect((await handle(request('GET', '/v1/admin/nothing'))).status).toBe(401);
    expect((await handle(request('GET', '/v1/admin/nothing', `Bearer ${RUNNER}`))).status).toBe(403);
    const admin = await handle(request('GET', '/v1/admin/nothing', `Bearer ${ADMIN}`));
    expect(admin.status).toBe(404);
    expect(errorOf(admin)).toEqual({ code: 'not_found', message: 'no route GET /v1/admin/nothing' });
    expect((await handle(request('GET', '/v1/nothing'))).status).toBe(401);
    expect((await handle(request('PUT', '/v1/session', `Bearer ${ADMIN}`))).status).toBe(403);
    expect(errorOf(await handle(request('PUT', '/v1/session', `Bearer ${RUNNER}`)))).toEqual({ code: 'not_found', message: 'no route PUT /v1/session' });
    expect(errorOf(await handle(request('GET', '/elsewhere')))).toEqual({ code: 'not_found', message: 'no route GET /elsewhere' });
    // A prefix route needs its slash: /v1/files alone is not /v1/files/.
    expect(errorOf(await handle(request('GET', '/v1/files', `Bearer ${RUNNER}`)))).toEqual({ code: 'not_found', message: 'no route GET /v1/files' });
  });

  it('an unexpected error: 500 without details, logged with the request and its id', async () => {
    const { handle, logged } = routerOf(async () => {
      throw new TypeError('boom');
    });
    const res = await handle(request('GET', '/metrics', `Bearer ${ADMIN}`));
    expect(res.status).toBe(500);
    expect(errorOf(res)).toEqual({ code: 'internal', message: 'internal error (logged by the control plane)' });
    expect(logged).toHaveLength(1);
    expect(logged[0]?.line).toMatch(/^internal error on GET \/metrics \(request req-7\): TypeError: boom\n/);
    expect(logged[0]?.meta).toEqual({ level: 'error', requestId: 'req-7' });
    const thrown = routerOf(async () => Promise.reject('a string'));
    await thrown.handle(request('GET', '/metrics', `Bearer ${ADMIN}`));
    expect(thrown.logged[0]?.line).toBe('internal error on GET /metrics (request req-7): a string');
  });
});

describe('httpRouteOf', () => {
  it('names each route by its template, never the path', () => {
    const cases: [method: string, path: string, query: string, route: string][] = [
      ['GET', '/healthz', '', 'healthz'],
      ['HEAD', '/healthz', '', 'healthz'],
      ['GET', '/metrics', '', 'metrics'],
      ['POST', '/v1/admin/sessions', '', 'admin_session_create'],
      ['DELETE', '/v1/admin/sessions/abc', '', 'admin_session_revoke'],
      ['GET', '/v1/admin/explain', '', 'admin_explain'],
      ['GET', '/v1/session', '', 'session'],
      ['GET', '/v1/plan', '', 'plan'],
      ['GET', '/v1/plan', 'wait=30', 'plan_long_poll'],
      ['GET', '/v1/files/team_x/secret.md', '', 'files'],
      ['GET', '/v1/grants/account/a.md', '', 'grants'],
      ['POST', '/v1/batch', '', 'batch'],
      ['POST', '/v1/read', '', 'read'],
      ['POST', '/v1/can-load', '', 'can_load'],
      ['GET', '/v1/manifest', '', 'manifest'],
      ['GET', '/v1/reminder', '', 'reminder'],
      ['GET', '/v1/files', '', 'other'],
      ['POST', '/v1/plan', '', 'other'],
      ['GET', '/nothing', 'wait=1', 'other'],
      ['GET', '/v1/manifest', 'wait=1', 'manifest'],
    ];
    for (const [method, path, query, route] of cases) expect(httpRouteOf(method, path, new URLSearchParams(query)), `${method} ${path}?${query}`).toBe(route);
  });

  it('every template metrics know is one a request can be counted under', () => {
    const reached = new Set(['healthz', 'metrics', 'admin_session_create', 'admin_session_revoke', 'admin_explain', 'session', 'plan', 'plan_long_poll', 'files', 'grants', 'batch', 'read', 'can_load', 'manifest', 'reminder', 'other']);
    expect(new Set(HTTP_ROUTES)).toEqual(reached);
  });
});
