// Session state in a real PostgreSQL, against what an attacker or a slow
// database does to it: a revocation while the replica reloads that session
// (PostgreSQL holding the read-set table) or while it is not listening,
// made-up tokens by the thousand, and a PostgreSQL that is down (what the
// client then sees of the state URL).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { LOOKUP_BATCH } from '../../src/server/state/postgres/pg-session-cache.js';
import { INSERT_SESSION } from '../../src/server/state/postgres/pg-session-rows.js';
import { hashToken, newToken } from '../../src/server/state/session-record.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
const HEARTBEAT_MS = 200;
const ADMIN = 'kfsadmin_trust_0123456789abcdef';
const opened: TestControlPlane[] = [];

beforeAll(async () => {
  pgc = await startPostgres();
  dir = await makeDataDir({
    teams: { payments: 'Payments' },
    users: { alice: { teams: ['payments'] } },
    files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' },
  });
});

afterAll(async () => {
  for (const cp of opened) await cp.close().catch(() => undefined);
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
});

async function replica(database: string, stateUrl = pgc.url(database)): Promise<TestControlPlane> {
  const cp = await startControlPlane({ dataDir: dir, adminToken: ADMIN, stateUrl, stateHeartbeatMs: HEARTBEAT_MS, auditLog: `${dir}/.knowledgefs/audit-trust-${opened.length}.log` });
  opened.push(cp);
  return cp;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const viewStatus = async (cp: TestControlPlane, token: string) => (await fetch(`${cp.url}/v1/session`, { headers: auth(token) })).status;

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last = await probe();
  while (!ok(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(last)} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
    last = await probe();
  }
  return last;
}

/** Polls `probe` on every turn of the event loop until `stop` settles; resolves with whether it was ever true. */
async function everTrue(probe: () => boolean, stop: Promise<unknown>): Promise<boolean> {
  let done = false;
  void stop.finally(() => (done = true));
  let seen = false;
  while (!done) {
    seen ||= probe();
    await new Promise((r) => setImmediate(r));
  }
  return seen || probe();
}

describe('revocation', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    await pgc.createDatabase('revoke');
    a = await replica('revoke');
    b = await replica('revoke');
  });

  it('a revocation through A holds on B within the bound while B is reloading that session on a slow PostgreSQL, and the reload does not undo it', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect(await viewStatus(b, s.token)).toBe(200);
    const holder = new pg.Client({ connectionString: pgc.url('revoke') });
    await holder.connect();
    try {
      // The read-set table held: B's reload of the session (it reads the read set) waits on it.
      await holder.query('BEGIN; LOCK TABLE knowledgefs_read_set IN ACCESS EXCLUSIVE MODE');
      // A change too big to notify, as a replica sends it: B reloads the session.
      await pgc.sql(
        `UPDATE knowledgefs_sessions SET version = version + 1 WHERE id = $1 RETURNING pg_notify('knowledgefs_sessions', id || ' ' || version || ' {"kind":"reload"}')`,
        [s.sessionId],
        'revoke',
      );
      await until(
        "B's reload waiting on the lock",
        async () => (await pgc.sql<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = 'revoke' AND application_name = 'knowledgefs' AND wait_event_type = 'Lock'", [], 'revoke'))[0]?.n,
        (n) => Number(n) >= 1,
      );
      const revokedAt = Date.now();
      expect((await fetch(`${a.url}/v1/admin/sessions/${s.sessionId}`, { method: 'DELETE', headers: auth(ADMIN) })).status).toBe(204);
      await until('B refusing the revoked token', async () => viewStatus(b, s.token), (st) => st === 401, 2 * HEARTBEAT_MS + 1_000);
      expect(Date.now() - revokedAt).toBeLessThan(2 * HEARTBEAT_MS + 1_000);
      // The reload returns a row read before the revocation committed: the record stays revoked throughout.
      const released = holder.query('COMMIT');
      const record = b.cp.sessions.cached(s.sessionId);
      const settled = until('B reloaded the session', async () => Number((await pgc.sql<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = 'revoke' AND application_name = 'knowledgefs' AND state = 'active'", [], 'revoke'))[0]?.n), (n) => n === 0).then(() => new Promise((r) => setTimeout(r, 200)));
      expect(await everTrue(() => record?.revoked === false, Promise.all([released, settled]))).toBe(false);
      expect(await viewStatus(b, s.token)).toBe(401);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });

  it('a revocation made while B was not listening holds once B listens again (learnt by reloading)', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect(await viewStatus(b, s.token)).toBe(200);
    // Cut the listening connections and revoke in the same round trip: nobody hears of it.
    await pgc.sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'revoke' AND application_name = 'knowledgefs-listen';
       UPDATE knowledgefs_sessions SET revoked = true, version = version + 1 WHERE id = '${s.sessionId}'`,
      undefined,
      'revoke',
    );
    // Refused (503) while not listening, then 401 once back: never 200 again.
    const seen = new Set<number>();
    await until('B refusing the token it did not hear revoked', async () => {
      const st = await viewStatus(b, s.token);
      seen.add(st);
      return st;
    }, (st) => st === 401, 15_000);
    expect(seen.has(200)).toBe(false);
    expect(b.logs.join('\n')).toMatch(/lost the PostgreSQL notification connection/);
  });
});

describe('made-up tokens', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    await pgc.createDatabase('madeup');
    a = await replica('madeup');
    b = await replica('madeup');
  });

  const trips = async (cp: TestControlPlane) => {
    const text = await (await fetch(`${cp.url}/metrics`, { headers: auth(ADMIN) })).text();
    return Number(/^knowledgefs_state_round_trips_total (\d+)/m.exec(text)?.[1]);
  };

  it('thousands of made-up tokens cost a few round trips, not one each, and none when tried again', async () => {
    const N = 1_000;
    const WAVE = 200;
    const tokens = Array.from({ length: N }, () => newToken());
    const attack = async () => {
      for (let i = 0; i < N; i += WAVE) {
        const statuses = await Promise.all(tokens.slice(i, i + WAVE).map((t) => viewStatus(b, t)));
        expect(statuses.filter((st) => st !== 401)).toEqual([]);
      }
    };
    const before = await trips(b);
    await attack();
    const first = (await trips(b)) - before;
    await attack();
    const again = (await trips(b)) - before - first;
    process.stderr.write(`made-up tokens: ${N} in waves of ${WAVE}: ${first} round trips, ${again} when tried again\n`);
    // How many share a query depends on how many the replica has read when one ends: at most one each.
    expect(first).toBeLessThanOrEqual(N);
    expect(again).toBe(0);
    // Arriving together, they share queries of LOOKUP_BATCH (the first goes alone, before the rest arrive).
    const together = Array.from({ length: 2 * N }, () => newToken());
    const start = await trips(b);
    expect(await Promise.all(together.map((t) => b.cp.sessions.authenticate(t)))).toEqual(together.map(() => null));
    const batched = (await trips(b)) - start;
    process.stderr.write(`made-up tokens: ${2 * N} at once: ${batched} round trips\n`);
    expect(batched).toBeLessThanOrEqual(Math.ceil((2 * N) / LOOKUP_BATCH) + 1);
    // A real session still works through B, looked up like any token B has not seen.
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect(await viewStatus(b, s.token)).toBe(200);
  });

  it('a session created for a token B just refused works through B as soon as its creation is announced', async () => {
    const token = newToken();
    expect(await viewStatus(b, token)).toBe(401);
    expect(await viewStatus(b, token)).toBe(401); // remembered as unknown
    const id = `ses_${randomBytes(12).toString('hex')}`;
    // The statement a replica creates a session with, and its announcement.
    await pgc.sql(INSERT_SESSION, [id, hashToken(token), 'personal', 'alice', null, new Date().toISOString(), JSON.stringify({ kind: 'created', tokenHash: hashToken(token) })], 'madeup');
    await until('B accepting the new session', async () => viewStatus(b, token), (st) => st === 200, 2 * HEARTBEAT_MS + 1_000);
  });
});

describe('PostgreSQL down', () => {
  it('what clients are told names no state URL (nor host, port, database or password); the log does, redacted', async () => {
    await pgc.createDatabase('outage_words');
    const a = await replica('outage_words', `${pgc.url('outage_words')}?application_name=kfs&password=query-secret`);
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect(await a.cp.sessions.describe()).toMatch(/PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/outage_words\?application_name=kfs&password=REDACTED$/);
    await pgc.stop('fast');
    try {
      const bodies: string[] = [];
      const collect = async (res: Promise<Response>) => {
        const r = await res;
        if (r.status === 503) bodies.push(await r.text());
        return r.status;
      };
      // Writes query PostgreSQL at once; reads are refused once the cache is no longer confirmed.
      expect(await collect(fetch(`${a.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_payments/DUTY.md', mount: true }) }))).toBe(503);
      await until('503 once PostgreSQL is gone', async () => collect(fetch(`${a.url}/v1/session`, { headers: auth(s.token) })), (st) => st === 503, 2 * HEARTBEAT_MS + 2_000);
      // Any bearer token, even a made-up one.
      expect(await collect(fetch(`${a.url}/v1/plan`, { headers: auth(newToken()) }))).toBe(503);
      expect(bodies.length).toBeGreaterThanOrEqual(3);
      for (const body of bodies) {
        expect(JSON.parse(body)).toMatchObject({ error: { code: 'unavailable', message: expect.stringMatching(/^session state unavailable: .*PostgreSQL.*; retry shortly$/) } });
        expect(body).not.toMatch(/postgres(ql)?:\/\/|127\.0\.0\.1|outage_words|query-secret/);
        expect(body).not.toContain(String(pgc.port));
      }
      // Where and why go to the log: the first failed reconnect names the URL, redacted (it may come a heartbeat after the 503s).
      const where = /PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/outage_words\?application_name=kfs&password=REDACTED/;
      const log = await until('the log naming where PostgreSQL is, redacted', async () => a.logs.join('\n'), (l) => where.test(l), 2 * HEARTBEAT_MS + 5_000);
      expect(log).not.toContain('query-secret');
    } finally {
      await pgc.start();
    }
  });
});
