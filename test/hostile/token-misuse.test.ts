// Token misuse against a real control plane over HTTP: no token, wrong or
// malformed tokens, another session's token, a runner token on admin routes
// (and the admin token on runner routes), and a revoked session's token
// replayed — also after a restart, since revocation must be persisted. A bad
// token is told nothing: every 401 is the same answer, whichever way the
// token was wrong.

import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { canaryIn, makeHostileData, type HostileData } from './hostile-data.js';
import { fingerprint, rawRequest, type RawResponse } from './raw-http.js';

let data: HostileData;
let cp: TestControlPlane;
let stateFile: string;
let alice: { sessionId: string; token: string };
let bob: { sessionId: string; token: string };

const RUNNER_ROUTES: readonly { method: string; target: string; body?: string }[] = [
  { method: 'GET', target: '/v1/session' },
  { method: 'GET', target: '/v1/plan' },
  { method: 'GET', target: '/v1/files/account/DUTY.md' },
  { method: 'GET', target: '/v1/files/team_storage/DUTY.md' },
  { method: 'GET', target: '/v1/grants/account' },
  { method: 'POST', target: '/v1/read', body: '{"path": "account/DUTY.md", "mount": false}' },
  { method: 'GET', target: '/v1/manifest' },
  { method: 'GET', target: '/v1/reminder' },
];
const ADMIN_ROUTES: readonly { method: string; target: string; body?: string }[] = [
  { method: 'POST', target: '/v1/admin/sessions', body: '{"kind": "personal", "creator": "alice"}' },
  { method: 'DELETE', target: '/v1/admin/sessions/ses_000000000000000000000000' },
];

function port(): number {
  return Number(new URL(cp.url).port);
}

function call(route: { method: string; target: string; body?: string }, authorization?: string): Promise<RawResponse> {
  return rawRequest(port(), {
    method: route.method,
    target: route.target,
    headers: authorization === undefined ? {} : { authorization },
    ...(route.body !== undefined ? { body: route.body } : {}),
  });
}

function errorCode(res: RawResponse): string {
  return (JSON.parse(res.body.toString('utf8')) as { error: { code: string } }).error.code;
}

beforeAll(async () => {
  data = await makeHostileData();
  stateFile = join(data.root, 'state.json');
  cp = await startControlPlane({ dataDir: data.dataDir, stateFile });
  alice = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
  bob = await cp.createSession({ kind: 'personal', creator: 'bob' });
});

afterAll(async () => {
  await cp?.close();
  await data?.cleanup();
});

describe('runner routes refuse bad tokens with one indistinguishable 401', () => {
  const bad = (): [string, string | undefined][] => [
    ['no header', undefined],
    ['empty', ''],
    ['Bearer alone', 'Bearer'],
    ['Bearer + spaces', 'Bearer    '],
    ['random token', `Bearer kfs_${randomBytes(32).toString('base64url')}`],
    ['truncated token', `Bearer ${alice.token.slice(0, -1)}`],
    ['one char changed', `Bearer ${alice.token.slice(0, -1)}${alice.token.endsWith('A') ? 'B' : 'A'}`],
    ['token + suffix', `Bearer ${alice.token}x`],
    ['two tokens', `Bearer ${alice.token} ${bob.token}`],
    ['Basic scheme', `Basic ${Buffer.from(`x:${alice.token}`).toString('base64')}`],
    ['token without scheme', alice.token],
    ['token hash', `Bearer ${'0'.repeat(64)}`],
    ['huge token', `Bearer ${'a'.repeat(8000)}`],
    ['NUL in token', `Bearer kfs_\u0001abc`],
  ];

  it('every route, every bad token: 401, same bytes, nothing leaked', async () => {
    for (const route of RUNNER_ROUTES) {
      const reference = await call(route);
      expect(reference.status, `${route.target} without token`).toBe(401);
      for (const [label, auth] of bad()) {
        const res = await call(route, auth);
        // A header Node itself rejects (control characters) is a 400 from the parser: also fine, never a 5xx.
        if (res.status === 400 && label === 'NUL in token') continue;
        expect(res.status, `${route.target} ${label}`).toBe(401);
        expect(fingerprint(res), `${route.target} ${label}`).toBe(fingerprint(reference));
        expect(canaryIn(res.body, data.markers)).toBeNull();
        expect(res.body.includes('DUTY')).toBe(false);
      }
    }
  });

  it('the token is accepted case-insensitively as a Bearer scheme only, never from the query string', async () => {
    expect((await call({ method: 'GET', target: '/v1/session' }, `bearer ${alice.token}`)).status).toBe(200);
    expect((await call({ method: 'GET', target: `/v1/session?token=${alice.token}` })).status).toBe(401);
    expect((await call({ method: 'GET', target: `/v1/session?access_token=${alice.token}` })).status).toBe(401);
  });
});

describe('one token, one session', () => {
  it("a session's token sees its own session only, and another session's reads and mounts stay invisible", async () => {
    const a = await call({ method: 'GET', target: '/v1/session' }, `Bearer ${alice.token}`);
    const b = await call({ method: 'GET', target: '/v1/session' }, `Bearer ${bob.token}`);
    expect(JSON.parse(a.body.toString()).sessionId).toBe(alice.sessionId);
    expect(JSON.parse(b.body.toString()).sessionId).toBe(bob.sessionId);
    // bob (storage member) mounts storage; alice's token still cannot load it, and her session does not show it.
    const mount = await call({ method: 'POST', target: '/v1/read', body: '{"path": "team_storage/DUTY.md", "mount": true}' }, `Bearer ${bob.token}`);
    expect(mount.status).toBe(200);
    expect(JSON.parse((await call({ method: 'GET', target: '/v1/session' }, `Bearer ${bob.token}`)).body.toString()).mounted).toEqual(['storage']);
    const viaAlice = await call({ method: 'GET', target: '/v1/files/team_storage/DUTY.md' }, `Bearer ${alice.token}`);
    expect(viaAlice.status).toBe(404);
    const aliceView = JSON.parse((await call({ method: 'GET', target: '/v1/session' }, `Bearer ${alice.token}`)).body.toString());
    expect(aliceView.mounted).toEqual([]);
    const plan = JSON.parse((await call({ method: 'GET', target: '/v1/plan?threshold=0' }, `Bearer ${alice.token}`)).body.toString()) as {
      scopes: { scope: string }[];
    };
    expect(plan.scopes.map((s) => s.scope)).not.toContain('team_storage');
    // alice's reminder knows nothing of bob's read set.
    const reminder = JSON.parse((await call({ method: 'GET', target: '/v1/reminder' }, `Bearer ${alice.token}`)).body.toString());
    expect(JSON.stringify(reminder)).not.toContain('team_storage');
  });
});

describe('tokens on the wrong routes', () => {
  it('a runner token on admin routes is 403 and changes nothing', async () => {
    const before = (await cp.cp.sessions.describe());
    for (const route of ADMIN_ROUTES) {
      const res = await call(route, `Bearer ${alice.token}`);
      expect(res.status, route.target).toBe(403);
      expect(errorCode(res)).toBe('forbidden');
    }
    // Not even its own session can be revoked with its own token.
    const self = await call({ method: 'DELETE', target: `/v1/admin/sessions/${alice.sessionId}` }, `Bearer ${alice.token}`);
    expect(self.status).toBe(403);
    expect((await call({ method: 'GET', target: '/v1/session' }, `Bearer ${alice.token}`)).status).toBe(200);
    expect((await cp.cp.sessions.describe())).toBe(before);
  });

  it('the admin token on runner routes is 403: it is not a session', async () => {
    for (const route of RUNNER_ROUTES) {
      const res = await call(route, `Bearer ${cp.adminToken}`);
      expect(res.status, route.target).toBe(403);
      expect(errorCode(res)).toBe('forbidden');
      expect(res.body.includes('DUTY')).toBe(false);
    }
  });

  it('no or wrong token on admin routes is 401', async () => {
    for (const route of ADMIN_ROUTES) {
      expect((await call(route)).status).toBe(401);
      expect((await call(route, `Bearer ${cp.adminToken}x`)).status).toBe(401);
    }
  });
});

describe('a revoked session stays revoked', () => {
  it('replaying a revoked token is 401 on every route, like any wrong token — before and after a restart', async () => {
    const victim = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const auth = `Bearer ${victim.token}`;
    expect((await call({ method: 'GET', target: '/v1/files/account/DUTY.md' }, auth)).status).toBe(200);
    const del = await call({ method: 'DELETE', target: `/v1/admin/sessions/${victim.sessionId}` }, `Bearer ${cp.adminToken}`);
    expect(del.status).toBe(204);
    const wrong = `Bearer kfs_${randomBytes(32).toString('base64url')}`;
    for (const route of RUNNER_ROUTES) {
      const res = await call(route, auth);
      expect(res.status, route.target).toBe(401);
      expect(fingerprint(res)).toBe(fingerprint(await call(route, wrong)));
    }
    // Revoking twice is harmless; the token never comes back.
    expect((await call({ method: 'DELETE', target: `/v1/admin/sessions/${victim.sessionId}` }, `Bearer ${cp.adminToken}`)).status).toBe(204);

    await cp.close();
    cp = await startControlPlane({ dataDir: data.dataDir, stateFile, adminToken: cp.adminToken });
    for (const route of RUNNER_ROUTES) expect((await call(route, auth)).status, `after restart ${route.target}`).toBe(401);
    // Live sessions survived the same restart.
    expect((await call({ method: 'GET', target: '/v1/session' }, `Bearer ${alice.token}`)).status).toBe(200);
    expect(JSON.parse((await call({ method: 'GET', target: '/v1/session' }, `Bearer ${bob.token}`)).body.toString()).mounted).toEqual(['storage']);
  });

  it('the state file holds token hashes only, never a token', async () => {
    const { readFile } = await import('node:fs/promises');
    const state = await readFile(stateFile, 'utf8');
    expect(state).not.toContain(alice.token);
    expect(state).not.toContain(bob.token);
    expect(state).not.toContain(cp.adminToken);
  });
});
