// Session state in a real PostgreSQL, shared by control-plane replicas that
// run in this process: migrations (twice, concurrently, a newer schema, expand
// and contract steps), any replica answering any session, mounts through one
// replica in plans of another (long-polls woken), revocation within the
// stated bound, and PostgreSQL going away (fail closed with 503 +
// Retry-After, then recovery with nothing acknowledged lost).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { CONTRACT_TABLE, EXPAND_TABLE, loadMigrations, migrate, migrationLogLines, type Migration } from '../../src/server/state/postgres/pg-migrations.js';
import { MAX_READ_SET } from '../../src/server/state/session-record.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { longPollsWaiting, startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
const HEARTBEAT_MS = 200;
const ADMIN = 'kfsadmin_replicas_0123456789abcdef';
const opened: TestControlPlane[] = [];

beforeAll(async () => {
  pgc = await startPostgres();
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search', ledger: 'Ledger' },
    users: { alice: { teams: ['payments', 'search', 'ledger'] } },
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/search/DUTY.md': '# Search\n',
      'teams/search/runbooks/reindex.md': 'reindex steps\n',
      'teams/ledger/DUTY.md': '# Ledger\n',
    },
  });
});

afterAll(async () => {
  for (const cp of opened) await cp.close().catch(() => undefined);
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
});

async function replica(database: string, extra: { stateHeartbeatMs?: number; now?: () => number } = {}): Promise<TestControlPlane> {
  const cp = await startControlPlane({
    dataDir: dir,
    adminToken: ADMIN,
    stateUrl: pgc.url(database),
    stateHeartbeatMs: extra.stateHeartbeatMs ?? HEARTBEAT_MS,
    ...(extra.now ? { now: extra.now } : {}),
    auditLog: `${dir}/.knowledgefs/audit-${opened.length}.log`,
  });
  opened.push(cp);
  return cp;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function readVia(url: string, token: string, path: string, mount = true) {
  return fetch(`${url}/v1/read`, { method: 'POST', headers: auth(token), body: JSON.stringify({ path, mount }) });
}

async function plan(url: string, token: string, headers: Record<string, string> = {}, query = '') {
  return fetch(`${url}/v1/plan${query}`, { headers: { ...auth(token), ...headers } });
}

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

describe('migrations', () => {
  it('run concurrently from five replicas and again: each file applied exactly once', async () => {
    const url = await pgc.createDatabase('migrate_concurrent');
    const migrations = await loadMigrations();
    expect(migrations.length).toBeGreaterThan(0);
    const clients = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        return c;
      }),
    );
    try {
      const applied = await Promise.all(clients.map(async (c) => (await migrate(c, migrations)).applied));
      // Exactly one replica applied the migrations; the others found them done.
      expect(applied.filter((a) => a.length > 0)).toEqual([migrations.map((m) => m.name)]);
      expect(await migrate(clients[0] as pg.Client, migrations)).toEqual({ applied: [], contracted: [], moved: [], newerExpand: [], pendingContract: [] });
      // Contract steps (001 among them) where every release looks; expand steps where 0.1.0 does not count them.
      const versions = async (table: string) => (await pgc.sql<{ version: number }>(`SELECT version FROM ${table} ORDER BY version`, [], 'migrate_concurrent')).map((r) => r.version);
      expect(await versions(CONTRACT_TABLE)).toEqual(migrations.filter((m) => m.kind === 'contract').map((m) => m.version));
      expect(await versions(EXPAND_TABLE)).toEqual(migrations.filter((m) => m.kind === 'expand').map((m) => m.version));
      expect(await versions(CONTRACT_TABLE)).toEqual([1]);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('a schema newer than this release is refused at start, naming both versions', async () => {
    await pgc.createDatabase('migrate_newer');
    await pgc.sql('CREATE TABLE knowledgefs_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())', [], 'migrate_newer');
    await pgc.sql("INSERT INTO knowledgefs_schema_migrations (version, name) VALUES (999, '999_future.sql')", [], 'migrate_newer');
    const known = Math.max(...(await loadMigrations()).map((m) => m.version));
    await expect(replica('migrate_newer')).rejects.toThrow(`schema is at version 999, newer than this knowledgefs knows (${known})`);
  });

  it('a failing migration is rolled back whole and names the file', async () => {
    const url = await pgc.createDatabase('migrate_broken');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const broken = [{ version: 1, name: '001_broken.sql', kind: 'contract' as const, sql: 'CREATE TABLE half_done (x int); SELECT no_such_function();' }];
      await expect(migrate(client, broken)).rejects.toThrow(/migration 001_broken.sql failed: .*no_such_function/);
      const left = await client.query("SELECT to_regclass('half_done') AS t, (SELECT count(*) FROM knowledgefs_schema_migrations) AS n");
      expect(left.rows[0]).toEqual({ t: null, n: '0' });
    } finally {
      await client.end();
    }
  });
});


describe('migrations, expand and contract', () => {
  async function connected<T>(database: string, use: (c: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: pgc.url(database) });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  }

  it('every migration file declares its kind; a file without one is refused, naming it', async () => {
    const kinds = (await loadMigrations()).map((m) => `${m.name} ${m.kind}`);
    expect(kinds).toEqual(['001_sessions.sql contract', '002_audit.sql expand', '003_replicas_gc.sql expand']);
    const dir = await mkdtemp(join(tmpdir(), 'kfs-migrations-'));
    try {
      await writeFile(join(dir, '001_a.sql'), '-- knowledgefs-migration: expand\nSELECT 1;\n');
      await writeFile(join(dir, '002_b.sql'), '-- adds a column\nSELECT 1;\n');
      await expect(loadMigrations(dir)).rejects.toThrow(`${join(dir, '002_b.sql')}: no "-- knowledgefs-migration: expand|contract" line`);
      await writeFile(join(dir, '002_b.sql'), '-- knowledgefs-migration: additive\nSELECT 1;\n');
      await expect(loadMigrations(dir)).rejects.toThrow("002_b.sql: an unknown kind 'additive'");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a database migrated by the build before (expand steps recorded as contract ones) is moved, times kept, and then left alone', async () => {
    await pgc.createDatabase('migrate_moved');
    const migrations = await loadMigrations();
    // What that build did: every file applied and recorded in knowledgefs_schema_migrations.
    await pgc.sql(`CREATE TABLE ${CONTRACT_TABLE} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`, [], 'migrate_moved');
    for (const m of migrations) {
      await pgc.sql(m.sql, [], 'migrate_moved');
      await pgc.sql(`INSERT INTO ${CONTRACT_TABLE} (version, name, applied_at) VALUES ($1, $2, $3)`, [m.version, m.name, `2026-11-0${m.version}T10:00:00Z`], 'migrate_moved');
    }
    const outcome = await connected('migrate_moved', (c) => migrate(c, migrations));
    expect(outcome).toEqual({ applied: [], contracted: [], moved: ['002_audit.sql', '003_replicas_gc.sql'], newerExpand: [], pendingContract: [] });
    const rows = (table: string) => pgc.sql<{ version: number; name: string; at: string }>(`SELECT version, name, to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS at FROM ${table} ORDER BY version`, [], 'migrate_moved');
    expect(await rows(CONTRACT_TABLE)).toEqual([{ version: 1, name: '001_sessions.sql', at: '2026-11-01' }]);
    expect(await rows(EXPAND_TABLE)).toEqual([
      { version: 2, name: '002_audit.sql', at: '2026-11-02' },
      { version: 3, name: '003_replicas_gc.sql', at: '2026-11-03' },
    ]);
    expect(await connected('migrate_moved', (c) => migrate(c, migrations))).toEqual({ applied: [], contracted: [], moved: [], newerExpand: [], pendingContract: [] });
  });

  it('an expand step newer than this release: the replica starts and says so in one line', async () => {
    await pgc.createDatabase('migrate_newer_expand');
    await connected('migrate_newer_expand', async (c) => migrate(c, await loadMigrations()));
    await pgc.sql(`INSERT INTO ${EXPAND_TABLE} (version, name) VALUES (998, '998_future_index.sql')`, [], 'migrate_newer_expand');
    const cp = await replica('migrate_newer_expand');
    const said = cp.logs.filter((l) => l.includes('998_future_index.sql'));
    expect(said).toEqual(['session state: the schema has expand migrations newer than this release (998_future_index.sql): they only add what this release ignores; starting']);
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    expect((await fetch(`${cp.url}/v1/session`, { headers: auth(s.token) })).status).toBe(200);
  });

  it('--migrate-contract without PostgreSQL state is a configuration error naming what it needs', async () => {
    await expect(startControlPlane({ dataDir: dir, adminToken: ADMIN, stateFile: `${dir}/.knowledgefs/contract-state.json`, migrateContract: true })).rejects.toThrow(
      '--migrate-contract needs PostgreSQL session state (--state postgres://… or $KNOWLEDGEFS_STATE_URL)',
    );
  });

  it('a contract step this release knows waits for the operator on a database in use, and is recorded where older releases refuse it', async () => {
    await pgc.createDatabase('migrate_contract');
    const migrations = await loadMigrations();
    const contract: Migration = { version: 4, name: '004_drop_probe.sql', kind: 'contract', sql: 'CREATE TABLE contract_probe (x int)' };
    const probe = async () => (await pgc.sql<{ t: string | null }>("SELECT to_regclass('contract_probe')::text AS t", [], 'migrate_contract'))[0]?.t;
    await connected('migrate_contract', (c) => migrate(c, migrations));
    const waiting = await connected('migrate_contract', (c) => migrate(c, [...migrations, contract]));
    expect(waiting).toEqual({ applied: [], contracted: [], moved: [], newerExpand: [], pendingContract: ['004_drop_probe.sql'] });
    expect(migrationLogLines(waiting)).toEqual([
      'contract migrations 004_drop_probe.sql not applied: once every replica runs this release, restart one with --migrate-contract (replicas of older releases refuse to start after it)',
    ]);
    expect(await probe()).toBeNull();
    const allowed = await connected('migrate_contract', (c) => migrate(c, [...migrations, contract], { contract: true }));
    expect(allowed).toMatchObject({ applied: ['004_drop_probe.sql'], contracted: ['004_drop_probe.sql'], pendingContract: [] });
    expect(migrationLogLines(allowed)).toEqual(['applied migrations 004_drop_probe.sql (contract)']);
    expect(await probe()).toBe('contract_probe');
    const contracted = await pgc.sql<{ version: number }>(`SELECT version FROM ${CONTRACT_TABLE} ORDER BY version`, [], 'migrate_contract');
    expect(contracted.map((r) => r.version)).toEqual([1, 4]);
    // This release, not knowing 004, refuses the database now, as 0.1.0 does.
    await expect(connected('migrate_contract', (c) => migrate(c, migrations))).rejects.toThrow(
      'the session-state schema is at version 4, newer than this knowledgefs knows (3): contract migration 004_drop_probe.sql changed what this release uses; upgrade knowledgefs on this replica',
    );
  });
});
describe('replicas sharing PostgreSQL state', () => {
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    await pgc.createDatabase('replicas');
    [a, b] = await Promise.all([replica('replicas'), replica('replicas')]);
  });

  it('a session created through A works through B; state holds only token hashes', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const view = await fetch(`${b.url}/v1/session`, { headers: auth(s.token) });
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({ sessionId: s.sessionId, creator: 'alice', team: 'payments', mounted: [] });
    const dump = await pgc.sql('SELECT * FROM knowledgefs_sessions', [], 'replicas');
    expect(JSON.stringify(dump)).not.toContain(s.token);
    expect(JSON.stringify(dump)).toContain(s.sessionId);
  });

  it('explain through B finds a session B never served (looked up in PostgreSQL), mounts made through A included', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await readVia(a.url, s.token, 'team_ledger/DUTY.md')).status).toBe(200);
    expect(b.cp.sessions.cached(s.sessionId)).toBeUndefined();
    const res = await fetch(`${b.url}/v1/admin/explain?session=${s.sessionId}`, { headers: auth(ADMIN) });
    expect(res.status).toBe(200);
    const e = (await res.json()) as { session: { id: string; mounted: string[] }; readSet: { path: string }[] };
    expect(e.session).toMatchObject({ id: s.sessionId, mounted: ['ledger'] });
    expect(e.readSet.map((r) => r.path)).toEqual(['team_ledger/DUTY.md']);
    expect((await fetch(`${b.url}/v1/admin/explain?session=nope`, { headers: auth(ADMIN) })).status).toBe(404);
  });

  it('mount through A, plan through B: the team is in the next plan, and a long-poll on B wakes', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const first = await plan(b.url, s.token, {}, '?threshold=0');
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag') as string;
    expect(((await first.json()) as { mounted: string[] }).mounted).toEqual([]);
    // A long-poll on B, then the mount through A.
    const polling = plan(b.url, s.token, { 'if-none-match': etag }, '?threshold=0&wait=20');
    await longPollsWaiting(b, 1);
    const started = Date.now();
    const res = await readVia(a.url, s.token, 'team_search/runbooks/reindex.md');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ mounted: true });
    const woken = await polling;
    expect(woken.status).toBe(200);
    // Woken by the change, not by the membership re-check (2 s) or the end of the wait.
    expect(Date.now() - started).toBeLessThan(1_500);
    const body = (await woken.json()) as { mounted: string[]; scopes: { scope: string }[] };
    expect(body.mounted).toEqual(['search']);
    expect(body.scopes.map((x) => x.scope)).toContain('team_search');
    // The next plan from B (no etag) shows it too, and B's session view.
    const next = (await (await plan(b.url, s.token, {}, '?threshold=0')).json()) as { mounted: string[] };
    expect(next.mounted).toEqual(['search']);
  });

  it('concurrent mounts of the same team through both replicas: mounted once, one of them reports the mount', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    const answers = await Promise.all([
      readVia(a.url, s.token, 'team_ledger/DUTY.md'),
      readVia(b.url, s.token, 'team_ledger/DUTY.md'),
      readVia(a.url, s.token, 'team_search/DUTY.md'),
      readVia(b.url, s.token, 'team_search/runbooks/reindex.md'),
    ]);
    const bodies = (await Promise.all(answers.map((r) => r.json()))) as { mounted: boolean }[];
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(bodies.filter((x, i) => i < 2 && x.mounted).length).toBe(1);
    expect(bodies.filter((x, i) => i >= 2 && x.mounted).length).toBe(1);
    const rows = await pgc.sql<{ mounted: string[] }>('SELECT mounted FROM knowledgefs_sessions WHERE id = $1', [s.sessionId], 'replicas');
    expect([...(rows[0]?.mounted ?? [])].sort()).toEqual(['ledger', 'search']);
    // Both replicas converge on the same read set and mounts.
    for (const cp of [a, b]) {
      await until('read set on a replica', async () => cp.cp.sessions.cached(s.sessionId)?.readSet.length, (n) => n === 3);
      expect([...(cp.cp.sessions.cached(s.sessionId)?.mounted ?? [])].sort()).toEqual(['ledger', 'search']);
    }
  });

  it('a revocation through A is refused by B within the stated bound (2 × heartbeat), and ends a long-poll there', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect((await fetch(`${b.url}/v1/session`, { headers: auth(s.token) })).status).toBe(200);
    const first = await plan(b.url, s.token);
    const polling = plan(b.url, s.token, { 'if-none-match': first.headers.get('etag') as string }, '?wait=20');
    await longPollsWaiting(b, 1);
    const revokedAt = Date.now();
    const del = await fetch(`${a.url}/v1/admin/sessions/${s.sessionId}`, { method: 'DELETE', headers: auth(ADMIN) });
    expect(del.status).toBe(204);
    await until('B refusing the revoked token', async () => (await fetch(`${b.url}/v1/session`, { headers: auth(s.token) })).status, (st) => st === 401, 2 * HEARTBEAT_MS + 1_000);
    expect(Date.now() - revokedAt).toBeLessThan(2 * HEARTBEAT_MS + 1_000);
    // The waiting long-poll ends with the refusal itself, as a new request would get it.
    const ended = await polling;
    expect(ended.status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(5_000);
  });

  it('round trips: plans (200 and 304), grants and file reads cost none; a read-tool read one; a re-read none', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const trips = async () => {
      const text = await (await fetch(`${a.url}/metrics`, { headers: auth(ADMIN) })).text();
      return Number(/^knowledgefs_state_round_trips_total (\d+)/m.exec(text)?.[1]);
    };
    // The session's first request on A loads it (it was created there, so it is cached already).
    const first = await plan(a.url, s.token);
    const etag = first.headers.get('etag') as string;
    const before = await trips();
    for (let i = 0; i < 5; i++) {
      expect((await plan(a.url, s.token, { 'if-none-match': etag })).status).toBe(304);
      expect((await plan(a.url, s.token)).status).toBe(200);
      expect((await fetch(`${a.url}/v1/grants/team_payments`, { headers: auth(s.token) })).status).toBe(200);
      expect((await fetch(`${a.url}/v1/files/account/DUTY.md`, { headers: auth(s.token) })).status).toBe(200);
    }
    expect(await trips()).toBe(before);
    expect((await readVia(a.url, s.token, 'account/DUTY.md', false)).status).toBe(200);
    expect(await trips()).toBe(before + 1);
    expect((await readVia(a.url, s.token, 'account/DUTY.md', false)).status).toBe(200);
    expect(await trips()).toBe(before + 1);
  });

  it('a replica too busy to run its heartbeat on time confirms on demand instead of refusing', async () => {
    // Its clock jumps past the bound with no heartbeat run: what a held event loop looks like to it.
    let skew = 0;
    const busy = await replica('replicas', { stateHeartbeatMs: 60_000, now: () => Date.now() + skew });
    const s = await busy.createSession({ kind: 'personal', creator: 'alice' });
    skew = 10 * 60_000;
    const res = await fetch(`${busy.url}/v1/session`, { headers: auth(s.token) });
    expect(res.status).toBe(200);
  });

  it('the read set holds at most MAX_READ_SET reads: the oldest are forgotten first, a re-read counts as new, both replicas agree', async () => {
    // 10 003 reads, one round trip each.
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    const state = a.cp.sessions;
    const path = (i: number) => `account/f${i}.md`;
    const read = async (p: string, sha: string) => {
      const record = state.cached(s.sessionId);
      expect(record).toBeDefined();
      await state.recordRead(record!, { path: p, sha256: sha.repeat(64) }, null);
    };
    for (let i = 0; i < MAX_READ_SET; i++) await read(path(i), 'a');
    await read(path(1), 'b'); // moves to the newest end
    await read('account/new-1.md', 'c');
    await read('account/new-2.md', 'c');
    const expected = [...Array.from({ length: MAX_READ_SET - 3 }, (_, i) => path(i + 3)), path(1), 'account/new-1.md', 'account/new-2.md'];
    const rows = await pgc.sql<{ path: string }>('SELECT path FROM knowledgefs_read_set WHERE session_id = $1 ORDER BY read_order', [s.sessionId], 'replicas');
    expect(rows.map((r) => r.path)).toEqual(expected);
    expect(state.cached(s.sessionId)?.readSet.map((e) => e.path)).toEqual(expected);
    // B loads the session from PostgreSQL when it first answers it.
    expect((await fetch(`${b.url}/v1/session`, { headers: auth(s.token) })).status).toBe(200);
    await until('B seeing the capped read set', async () => b.cp.sessions.cached(s.sessionId)?.readSet.at(-1)?.path, (p) => p === 'account/new-2.md');
    expect(b.cp.sessions.cached(s.sessionId)?.readSet.map((e) => e.path)).toEqual(expected);
  });

  it('the reminder through B reports a change after a read through A', async () => {
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect((await readVia(a.url, s.token, 'team_ledger/DUTY.md', false)).status).toBe(200);
    const { writeDataFile } = await import('../helpers/data-dir.js');
    await writeDataFile(dir, 'teams/ledger/DUTY.md', '# Ledger, edited\n');
    await Promise.all([a.rescan(), b.rescan()]);
    const remind = async (url: string) => (await (await fetch(`${url}/v1/reminder?today=2026-01-01`, { headers: auth(s.token) })).json()) as { changed: string[] };
    expect((await remind(b.url)).changed).toEqual(['team_ledger/DUTY.md']);
    // Reported once: neither replica reports it again.
    await until('A seeing the reminder update', async () => a.cp.sessions.cached(s.sessionId)?.readSet[0]?.sha256, (sha) => sha !== undefined && sha === b.cp.sessions.cached(s.sessionId)?.readSet[0]?.sha256);
    expect((await remind(a.url)).changed).toEqual([]);
    expect((await remind(b.url)).changed).toEqual([]);
  });
});

describe('PostgreSQL unreachable', () => {
  it('at start: the replica refuses to start, naming PostgreSQL and the reason, without the password', async () => {
    const closedPort = pgc.port + 1 === 65536 ? 1 : pgc.port + 1;
    await expect(
      startControlPlane({ dataDir: dir, adminToken: ADMIN, stateUrl: `postgres://kfs:hunter2secret@127.0.0.1:${closedPort}/x` }),
    ).rejects.toThrow(/session state: cannot connect to PostgreSQL at postgres:\/\/kfs@127\.0\.0\.1:\d+\/x: .*ECONNREFUSED/);
    await expect(
      startControlPlane({ dataDir: dir, adminToken: ADMIN, stateUrl: `postgres://kfs:hunter2secret@127.0.0.1:${closedPort}/x` }),
    ).rejects.not.toThrow(/hunter2secret/);
  });

  it('a lost notification connection: what changed while nobody listened is there once it is back', async () => {
    await pgc.createDatabase('missed');
    const a = await replica('missed', { stateHeartbeatMs: 1_000 });
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    const viewOn = async (cp: TestControlPlane) => fetch(`${cp.url}/v1/session`, { headers: auth(s.token) });
    expect((await viewOn(a)).status).toBe(200);
    // Cut every listening connection, then record a mount the way a replica does (the same
    // function, the same notification): nobody listens, so A must find it when it is back.
    // One round trip, so it is done before A can listen again.
    await pgc.sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'missed' AND application_name = 'knowledgefs-listen';
       SELECT * FROM knowledgefs_record_read('${s.sessionId}', 'team_search/DUTY.md', '${'a'.repeat(64)}', 'search', NULL, '{"kind":"reload"}')`,
      undefined,
      'missed',
    );
    const mounted = async () => {
      const r = await viewOn(a);
      return r.status === 200 ? ((await r.json()) as { mounted: string[] }).mounted.join(',') : `HTTP ${r.status}`;
    };
    expect(await until('A showing the mount it was never told of', mounted, (m) => m === 'search', 15_000)).toBe('search');
    expect(a.logs.join('\n')).toMatch(/lost the PostgreSQL notification connection/);
  });

  it('while serving: fail closed with 503 + Retry-After within the bound, then recover with every acknowledgement kept', async () => {
    await pgc.createDatabase('outage');
    const a = await replica('outage');
    const b = await replica('outage');
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await readVia(a.url, s.token, 'team_search/DUTY.md')).status).toBe(200);
    await until('B knowing the mount', async () => (await (await fetch(`${b.url}/v1/session`, { headers: auth(s.token) })).json()) as { mounted: string[] }, (v) => v.mounted.length === 1);

    await pgc.stop('fast');
    const stoppedAt = Date.now();
    for (const cp of [a, b]) {
      const refused = await until('503 once PostgreSQL is gone', async () => fetch(`${cp.url}/v1/grants/account`, { headers: auth(s.token) }), (r) => r.status === 503, 2 * HEARTBEAT_MS + 2_000);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'unavailable',
        message: 'session state unavailable: lost contact with PostgreSQL; retry shortly',
      });
    }
    expect(Date.now() - stoppedAt).toBeLessThan(2 * HEARTBEAT_MS + 2_000);
    // Writes fail too, and are not acknowledged.
    expect((await readVia(a.url, s.token, 'team_ledger/DUTY.md')).status).toBe(503);
    expect((await a.createSession({ kind: 'personal', creator: 'alice' }).catch((e: Error) => e.message))).toMatch(/HTTP 503/);

    await pgc.start();
    for (const cp of [a, b]) {
      const view = await until('recovery', async () => fetch(`${cp.url}/v1/session`, { headers: auth(s.token) }), (r) => r.status === 200, 15_000);
      expect(((await view.json()) as { mounted: string[] }).mounted).toEqual(['search']);
    }
    expect(a.logs.join('\n')).toMatch(/lost the PostgreSQL notification connection/);
    expect(a.logs.join('\n')).toMatch(/listening to PostgreSQL again/);
  });
});
