// Over real HTTP on 127.0.0.1: who may see what. Token isolation between two
// sessions, 401/403 token cases, a personal session's denial byte-identical
// to a missing file, a team session's guidance, roles giving no exemption,
// denied requests never touching the pack store, path attacks rejected
// without reading anything outside the data dir, body size cap.

import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PackStore } from '../src/store/pack-store.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { rawRequest, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';

const SECRET = 'TOP-SECRET-OUTSIDE-DATA-DIR';

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
  users: {
    alice: { teams: ['payments', 'search'], role: 'member' },
    olivia: { teams: ['payments', 'search', 'storage'], role: 'owner' },
    adam: { teams: ['payments'], role: 'admin' },
  },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/runbooks/db.md': 'failover steps\n',
    'teams/search/DUTY.md': '# Search\n',
    'teams/storage/DUTY.md': '# Storage\n',
    'teams/storage/postmortems/2024-01.md': 'storage outage\n',
  },
};

let dir: string;
let cp: TestControlPlane;
const storeCalls: { method: string; scope?: string }[] = [];

function counting(store: PackStore): PackStore {
  return {
    get generation() {
      return store.generation;
    },
    scopes() {
      storeCalls.push({ method: 'scopes' });
      return store.scopes();
    },
    snapshot(scope) {
      storeCalls.push({ method: 'snapshot', scope });
      return store.snapshot(scope);
    },
    read(scope, path) {
      storeCalls.push({ method: 'read', scope });
      return store.read(scope, path);
    },
  };
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const get = (path: string, token?: string) => fetch(`${cp.url}${path}`, { headers: token ? auth(token) : {} });
const post = (path: string, token: string, body: unknown) =>
  fetch(`${cp.url}${path}`, { method: 'POST', headers: { ...auth(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  dir = await makeDataDir(spec);
  await writeFile(join(dirname(dir), `${dir.split('/').pop()}-secret.md`), SECRET);
  await writeDataFile(dir, 'secret.md', SECRET);
  cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 60_000, deps: { wrapPackStore: counting } });
});
afterAll(async () => {
  await cp?.close();
  await removeDataFile(dirname(dir), `${dir.split('/').pop()}-secret.md`).catch(() => undefined);
  await removeDataDir(dir);
});
beforeEach(async () => {
  await writeDirectory(dir, spec);
  await cp.rescan();
});

describe('tokens', () => {
  it('two sessions are isolated: each token sees only its own session and mounts', async () => {
    const a = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const b = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect(a.token).not.toBe(b.token);
    expect(a.token).toMatch(/^kfs_[A-Za-z0-9_-]{43}$/);
    expect(((await (await get('/v1/session', a.token)).json()) as { sessionId: string }).sessionId).toBe(a.sessionId);
    expect(((await (await get('/v1/session', b.token)).json()) as { sessionId: string }).sessionId).toBe(b.sessionId);

    // b mounts search; a is unaffected and still may not load it.
    const read = await post('/v1/read', b.token, { path: 'team_search/DUTY.md', mount: true });
    expect(read.status).toBe(200);
    expect(((await (await get('/v1/session', b.token)).json()) as { mounted: string[] }).mounted).toEqual(['search']);
    expect(((await (await get('/v1/session', a.token)).json()) as { mounted: string[] }).mounted).toEqual([]);
    expect((await get('/v1/files/team_search/DUTY.md', a.token)).status).toBe(403);
    const planA = (await (await get('/v1/plan?threshold=0', a.token)).json()) as { scopes: { scope: string }[] };
    expect(planA.scopes.map((s) => s.scope)).toEqual(['account', 'team_payments']);
  });

  it('missing, malformed, wrong and revoked tokens are 401; the other session keeps working', async () => {
    const a = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const b = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    expect((await get('/v1/session')).status).toBe(401);
    expect((await fetch(`${cp.url}/v1/session`, { headers: { authorization: a.token } })).status).toBe(401);
    expect((await get('/v1/session', `${a.token}x`)).status).toBe(401);
    expect((await get('/v1/session', 'kfs_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).toBe(401);
    const res401 = await get('/v1/plan', 'nope');
    expect(res401.headers.get('www-authenticate')).toBe('Bearer');
    expect(await res401.json()).toMatchObject({ error: { code: 'unauthorized' } });

    const del = await fetch(`${cp.url}/v1/admin/sessions/${a.sessionId}`, { method: 'DELETE', headers: auth(cp.adminToken) });
    expect(del.status).toBe(204);
    expect((await get('/v1/session', a.token)).status).toBe(401);
    expect((await get('/v1/files/account/DUTY.md', a.token)).status).toBe(401);
    expect((await get('/v1/session', b.token)).status).toBe(200);
  });

  it('a runner token on admin routes is 403; no or a wrong token there is 401; the admin token on runner routes is 403', async () => {
    const a = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const create = { kind: 'team', creator: 'alice', team: 'payments' };
    const asRunner = await post('/v1/admin/sessions', a.token, create);
    expect(asRunner.status).toBe(403);
    expect(await asRunner.json()).toMatchObject({ error: { code: 'forbidden' } });
    expect((await fetch(`${cp.url}/v1/admin/sessions/${a.sessionId}`, { method: 'DELETE', headers: auth(a.token) })).status).toBe(403);
    expect((await post('/v1/admin/sessions', 'wrong-admin-token', create)).status).toBe(401);
    expect((await fetch(`${cp.url}/v1/admin/sessions`, { method: 'POST', body: JSON.stringify(create) })).status).toBe(401);
    expect((await get('/v1/plan', cp.adminToken)).status).toBe(403);
    expect((await get('/v1/session', a.token)).status).toBe(200);
  });

  it('session create: unknown team or user and bad bodies are 400 with a clear message', async () => {
    const cases: [unknown, RegExp][] = [
      [{ kind: 'team', creator: 'alice', team: 'ghosts' }, /unknown team "ghosts"/],
      [{ kind: 'team', creator: 'mallory', team: 'payments' }, /unknown user "mallory"/],
      [{ kind: 'team', creator: 'alice' }, /team session needs "team"/],
      [{ kind: 'robot', creator: 'alice' }, /"kind" must be "team" or "personal"/],
      [{ kind: 'personal', creator: 'alice', team: 'Bad Team' }, /"team" must be a team id/],
      ['not json', /must be JSON|must be a JSON object/],
    ];
    for (const [body, message] of cases) {
      const res = await fetch(`${cp.url}/v1/admin/sessions`, {
        method: 'POST',
        headers: auth(cp.adminToken),
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const err = (await res.json()) as { error: { code: string; message: string } };
      expect(err.error.code).toBe('invalid_argument');
      expect(err.error.message).toMatch(message);
    }
  });

  it('a personal session bound to a team its creator is not in is refused (400); a team session for it is not', async () => {
    const before = cp.cp.sessions.stats().personal;
    const res = await fetch(`${cp.url}/v1/admin/sessions`, {
      method: 'POST',
      headers: auth(cp.adminToken),
      body: JSON.stringify({ kind: 'personal', creator: 'alice', team: 'storage' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        code: 'invalid_argument',
        message:
          'user "alice" is not a member of team "storage": a personal session can only be bound to one of its creator\'s teams (payments, search); create a team session for storage instead',
      },
    });
    expect(cp.cp.sessions.stats().personal).toBe(before);
    // A team session acts for its team; its creator's memberships are not asked.
    const team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'storage' });
    expect((await get('/v1/files/team_storage/DUTY.md', team.token)).status).toBe(200);
    expect((await get('/v1/files/team_payments/DUTY.md', team.token)).status).toBe(403);
  });
});

describe('denials', () => {
  it("a personal session's denial is byte-identical to a missing file (files, grants, read)", async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    // One request id for every request, so the answers compare byte for byte (an id is echoed; a made-up one is random).
    const h = { ...auth(s.token), 'x-request-id': 'compare-1' };
    // Denied: alice is not in storage, and the file exists.
    const deniedFile = await rawRequest(cp.url, 'GET', '/v1/files/team_storage/postmortems/2024-01.md', h);
    const deniedGrant = await rawRequest(cp.url, 'GET', '/v1/grants/team_storage', h);
    const readBody = JSON.stringify({ path: 'team_storage/postmortems/2024-01.md', mount: true });
    const deniedRead = await rawRequest(cp.url, 'POST', '/v1/read', { ...h, 'content-type': 'application/json' }, readBody);
    expect(deniedFile.status).toBe(404);
    expect(deniedRead.status).toBe(404);

    // Missing: a team that does not exist at all, where alice is no member either.
    const missingGrant = await rawRequest(cp.url, 'GET', '/v1/grants/team_nowhere', h);
    expect(missingGrant.raw.toString().replaceAll('team_nowhere', 'team_storage')).toBe(deniedGrant.raw.toString());

    // Missing: alice becomes a member of storage and the file is deleted; same requests again.
    await writeDirectory(dir, { ...spec, users: { ...spec.users, alice: { teams: ['payments', 'search', 'storage'] } } });
    await removeDataFile(dir, 'teams/storage/postmortems/2024-01.md');
    await cp.rescan();
    const missingFile = await rawRequest(cp.url, 'GET', '/v1/files/team_storage/postmortems/2024-01.md', h);
    const missingRead = await rawRequest(cp.url, 'POST', '/v1/read', { ...h, 'content-type': 'application/json' }, readBody);
    expect(missingFile.status).toBe(404);
    expect(missingFile.raw.equals(deniedFile.raw)).toBe(true);
    expect(missingRead.raw.equals(deniedRead.raw)).toBe(true);
    expect(deniedFile.head).not.toMatch(/^date:/im);
    await writeDataFile(dir, 'teams/storage/postmortems/2024-01.md', 'storage outage\n');
  });

  it('a team session asking for another team gets 403 with guidance naming both teams and what to do', async () => {
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const res = await get('/v1/files/team_search/DUTY.md', s.token);
    expect(res.status).toBe(403);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('denied');
    expect(error.message).toContain('team "payments"');
    expect(error.message).toContain('team "search"');
    expect(error.message).toMatch(/ask an admin to share/);
    expect(error.message).toMatch(/personal session/);
    expect(error.message).toMatch(/hand the incident to team "search"/);
    // The same guidance for a team that does not exist: decided before any lookup.
    const ghost = await get('/v1/files/team_ghosts/DUTY.md', s.token);
    expect(ghost.status).toBe(403);
  });

  it('roles give no exemption: an owner’s team session and an admin’s personal session are denied other teams', async () => {
    const owner = await cp.createSession({ kind: 'team', creator: 'olivia', team: 'payments' });
    expect((await get('/v1/files/team_storage/DUTY.md', owner.token)).status).toBe(403);
    expect((await get('/v1/grants/team_search', owner.token)).status).toBe(403);
    const admin = await cp.createSession({ kind: 'personal', creator: 'adam', team: 'payments' });
    expect((await get('/v1/files/team_storage/DUTY.md', admin.token)).status).toBe(404);
    expect((await get('/v1/files/team_payments/DUTY.md', admin.token)).status).toBe(200);
    // The owner's own personal session follows the owner's memberships, like anyone's.
    const ownerPersonal = await cp.createSession({ kind: 'personal', creator: 'olivia' });
    expect((await get('/v1/files/team_storage/DUTY.md', ownerPersonal.token)).status).toBe(200);
  });

  it('a denied request never touches the pack store', async () => {
    const team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const personal = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    storeCalls.length = 0;
    expect((await get('/v1/files/team_storage/DUTY.md', team.token)).status).toBe(403);
    expect((await get('/v1/files/team_storage/DUTY.md', personal.token)).status).toBe(404);
    expect((await get('/v1/grants/team_storage', personal.token)).status).toBe(404);
    expect((await post('/v1/read', personal.token, { path: 'team_storage/DUTY.md', mount: true })).status).toBe(404);
    expect((await post('/v1/read', team.token, { path: 'team_search/DUTY.md', mount: true })).status).toBe(403);
    expect(storeCalls).toEqual([]);
    // The wrapper does see allowed requests, so the check above can fail.
    expect((await get('/v1/files/team_search/DUTY.md', personal.token)).status).toBe(200);
    expect(storeCalls).toEqual([{ method: 'read', scope: 'team_search' }]);
  });

  it('every decision is audited with its trace, never with the token', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await get('/v1/files/team_storage/DUTY.md', s.token);
    await get('/v1/files/team_search/DUTY.md', s.token);
    await cp.cp.audit.flush();
    const text = await readFile(cp.cp.options.auditLog, 'utf8');
    expect(text).not.toContain(s.token);
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l['session'] === s.sessionId);
    expect(lines).toEqual([
      expect.objectContaining({ kind: 'personal', creator: 'alice', scope: 'team_storage', action: 'open', rule: 'creator-not-member', result: 'deny', membership: { status: 'ok', teams: ['payments', 'search'] } }),
      expect.objectContaining({ scope: 'team_search', action: 'open', rule: 'creator-member', result: 'allow' }),
    ]);
    expect(typeof lines[0]?.['time']).toBe('string');
  });
});

describe('bad input', () => {
  const attacks = [
    '/v1/files/account/../directory.json',
    '/v1/files/account/..%2fdirectory.json',
    '/v1/files/account/%2e%2e/directory.json',
    '/v1/files/account/%2E%2E/secret.md',
    '/v1/files/account/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
    '/v1/files/../secret.md',
    '/v1/files/account//DUTY.md',
    '/v1/files/account/DUTY.md/',
    '/v1/files/account/./DUTY.md',
    '/v1/files/account/..\\secret.md',
    '/v1/files/account/..%5csecret.md',
    '/v1/files/account/DUTY.md%00.txt',
    '/v1/files/account/%00',
    '/v1/files/account/%ff%fe',
    '/v1/files/account/%E0%80%AE%E0%80%AE/secret.md',
    `/v1/files/account/${'a'.repeat(300)}`,
    `/v1/files/account/${Array.from({ length: 20 }, () => 'b'.repeat(250)).join('/')}`,
    '/v1/files/teams/storage/DUTY.md',
    '/v1/files/team_../secret.md',
    '/v1/files/%2e%2e/secret.md',
    '/v1/files/team_storage%2fDUTY.md',
    '/v1/files/account',
    '/v1/grants/account/x',
    '/v1/grants/..',
  ];

  it.each(attacks)('GET %s → 400, nothing outside a pack read', async (path) => {
    const s = await cp.createSession({ kind: 'personal', creator: 'olivia' });
    storeCalls.length = 0;
    const res = await rawRequest(cp.url, 'GET', path, auth(s.token));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString())).toMatchObject({ error: { code: 'invalid_argument' } });
    expect(res.raw.toString()).not.toContain(SECRET);
    expect(storeCalls).toEqual([]);
  });

  it.each(['../secret.md', 'account/../secret.md', 'account//DUTY.md', 'account/a\\b', 'account/a\u0000b', '/account/DUTY.md', 'DUTY.md', ''])(
    'POST /v1/read %j → 400',
    async (path) => {
      const s = await cp.createSession({ kind: 'personal', creator: 'olivia' });
      const res = await post('/v1/read', s.token, { path, mount: true });
      expect(res.status).toBe(400);
      expect(await res.text()).not.toContain(SECRET);
    },
  );

  it('percent-encoded names that are valid are served', async () => {
    await writeDataFile(dir, 'account/notes/a b é.md', 'spaced\n');
    await cp.rescan();
    const s = await cp.createSession({ kind: 'personal', creator: 'olivia' });
    const res = await get(`/v1/files/account/notes/${encodeURIComponent('a b é.md')}`, s.token);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('spaced\n');
  });

  it('a request body over 64 KiB is 413; a bad JSON body is 400', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'olivia' });
    const big = await post('/v1/read', s.token, { path: 'account/DUTY.md', mount: false, pad: 'x'.repeat(70_000) });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: { code: 'too_large' } });
    const bad = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: '{"path":' });
    expect(bad.status).toBe(400);
    expect((await get('/v1/session', s.token)).status).toBe(200);
  });

  it('unknown routes are 404; /healthz needs no token', async () => {
    expect((await get('/healthz')).status).toBe(200);
    const s = await cp.createSession({ kind: 'personal', creator: 'olivia' });
    expect((await get('/v1/nope', s.token)).status).toBe(404);
    expect((await get('/elsewhere')).status).toBe(404);
  });
});
