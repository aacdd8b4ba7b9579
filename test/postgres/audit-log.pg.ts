// The fleet's decision log: replicas writing to PostgreSQL (--audit-log
// postgres) and read back by `knowledgefs audit` and `explain`; daily
// partitions created ahead and dropped past the retention; a sink that
// cannot write (its table locked) never slows a grant, drops beyond its
// buffer, counts the drops and says so once; `--audit-log -` puts only JSON
// lines on stdout.

import { spawn } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS as M } from '../../src/core/metrics.js';
import type { ExplainResponse } from '../../src/core/wire.js';
import type { AuditRecord } from '../../src/server/access/audit-log.js';
import { keepPartitions, partitionName } from '../../src/server/access/pg-audit-partitions.js';
import { loadMigrations, migrate } from '../../src/server/state/postgres/pg-migrations.js';
import { BIN, spawnControlPlane, startControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
const spawned: SpawnedControlPlane[] = [];
const ADMIN = 'kfsadmin_audit_0123456789abcdef';
const DAY = 24 * 3600 * 1000;

beforeAll(async () => {
  pgc = await startPostgres();
  dir = await makeDataDir({
    teams: { search: 'Search', pay: 'Payments' },
    users: { alice: { teams: ['search'] } },
    files: { 'account/DUTY.md': '# Account\n', 'teams/search/DUTY.md': '# Search\n', 'teams/pay/DUTY.md': '# Pay\n' },
  });
});

afterAll(async () => {
  for (const cp of spawned) await cp.kill('SIGKILL').catch(() => undefined);
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
});

function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function grant(url: string, token: string, scope: string): Promise<number> {
  const res = await fetch(`${url}/v1/grants/${scope}`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('two replicas, one decision log', () => {
  it('both replicas write decisions; `knowledgefs audit --session` shows both, and explain lists them', async () => {
    const url = await pgc.createDatabase('fleet');
    const args = (id: string) => ['--state', url, '--audit-log', 'postgres', '--replica-id', id];
    const a = await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: args('replica-a') });
    spawned.push(a);
    const b = await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: args('replica-b') });
    spawned.push(b);
    const s = await a.createSession({ kind: 'personal', creator: 'alice' });
    expect(await grant(a.url, s.token, 'team_search')).toBe(200);
    // Replica b learns of the session through PostgreSQL; a denied team answers 404 (not disclosed).
    await until('replica b to know the session', async () => ((await grant(b.url, s.token, 'team_pay')) === 404 ? true : undefined));

    const read = await until('both replicas in the log', async () => {
      const r = await runCli(['audit', '--session', s.sessionId, '--json'], { KNOWLEDGEFS_STATE_URL: url });
      expect(r.code, r.stderr).toBe(0);
      const records = r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditRecord);
      return new Set(records.map((x) => x.replica)).size === 2 ? records : undefined;
    });
    expect(read.find((r) => r.replica === 'replica-a' && r.scope === 'team_search')).toMatchObject({ result: 'allow', session: s.sessionId, action: 'open' });
    expect(read.find((r) => r.replica === 'replica-b' && r.scope === 'team_pay')).toMatchObject({ result: 'deny', rule: 'creator-not-member' });
    // Oldest first.
    expect([...read].sort((x, y) => x.time.localeCompare(y.time))).toEqual(read);

    const table = await runCli(['audit', '--session', s.sessionId, '--since', '1h'], { KNOWLEDGEFS_STATE_URL: url });
    expect(table.stdout).toMatch(/^time\s+replica\s+session\s+action/);
    expect(table.stdout).toContain('replica-b');

    const res = await fetch(`${a.url}/v1/admin/explain?session=${s.sessionId}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const explained = (await res.json()) as ExplainResponse;
    expect(explained.recentDecisions?.error).toBeNull();
    expect(new Set(explained.recentDecisions?.decisions.map((d) => d.replica))).toEqual(new Set(['replica-a', 'replica-b']));
    const text = await runCli(['explain', '--server', a.url, '--session', s.sessionId], { KNOWLEDGEFS_ADMIN_TOKEN: ADMIN });
    expect(text.stdout).toMatch(/recent {4}the last \d+ decisions, every replica, newest first/);
  });

  it('`audit --state` with a password is refused like `serve --state`, without echoing it', async () => {
    const r = await runCli(['audit', '--state', `postgres://kfs:pw-in-argv@127.0.0.1:${pgc.port}/fleet`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--state: the URL carries a password.*\$KNOWLEDGEFS_STATE_URL/);
    expect(r.stderr).not.toContain('pw-in-argv');
  });

  it('--audit-log postgres without PostgreSQL state is a configuration error naming --state', async () => {
    const r = await runCli(['serve', '--data', dir, '--listen', '127.0.0.1:0', '--state', `${dir}/.knowledgefs/other-state.json`, '--audit-log', 'postgres'], {
      KNOWLEDGEFS_ADMIN_TOKEN: ADMIN,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--audit-log postgres writes decisions to the state database: it needs --state postgres://');
  });
});

describe('daily partitions', () => {
  it('are created ahead and dropped past the retention, and keeping them twice changes nothing', async () => {
    const url = await pgc.createDatabase('parts');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await migrate(client, await loadMigrations());
      const now = Date.UTC(2026, 11, 1, 12);
      // A replica that ran 40 days ago left its partitions behind, with a decision in one.
      await keepPartitions(client, now - 40 * DAY, 30 * DAY);
      await client.query(
        `INSERT INTO knowledgefs_audit (time, replica, session, kind, creator, scope, action, rule, result) VALUES ($1, 'r', 's_old', 'personal', 'alice', 'account', 'open', 'account', 'allow')`,
        [new Date(now - 40 * DAY).toISOString()],
      );
      const changes = await keepPartitions(client, now, 2 * DAY);
      expect(changes.created).toEqual([-1, 0, 1, 2].map((d) => partitionName(now + d * DAY)));
      expect(changes.dropped.sort()).toEqual([-1, 0, 1, 2].map((d) => partitionName(now - 40 * DAY + d * DAY)).sort());
      expect((await client.query<{ n: number }>('SELECT count(*)::int AS n FROM knowledgefs_audit')).rows[0]?.n).toBe(0);
      expect(await keepPartitions(client, now, 2 * DAY)).toEqual({ created: [], dropped: [] });
      // Yesterday's partition ends today: kept with a 2-day retention one day on, dropped two days on.
      expect((await keepPartitions(client, now + DAY, 2 * DAY)).dropped).toEqual([]);
      expect((await keepPartitions(client, now + 2 * DAY, 2 * DAY)).dropped).toEqual([partitionName(now - DAY)]);
    } finally {
      await client.end();
    }
  });
});

describe('a sink that cannot write', () => {
  it('never slows a grant, holds at most its buffer, counts what it dropped, and logs once', async () => {
    const url = await pgc.createDatabase('outage');
    const BUFFER = 50;
    const cp = await startControlPlane({ dataDir: dir, stateUrl: url, auditLog: 'postgres', auditBufferRecords: BUFFER, replicaId: 'r-outage' });
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
      expect(await grant(cp.url, s.token, 'team_search')).toBe(200);
      await cp.cp.audit.flush();
      // Every INSERT now waits on the lock until its statement timeout (2 s).
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE knowledgefs_audit IN ACCESS EXCLUSIVE MODE');
      const N = 400;
      let slowest = 0;
      for (let i = 0; i < N / 8; i++) {
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            const started = performance.now();
            expect(await grant(cp.url, s.token, 'team_search')).toBe(200);
            slowest = Math.max(slowest, performance.now() - started);
          }),
        );
      }
      // The bound: no grant waited for an INSERT (each of which waits 2 s on the lock).
      expect(slowest).toBeLessThan(2_000);
      await until('the outage line', async () => (cp.logs.some((l) => l.includes('audit log: writes to PostgreSQL failing')) ? true : undefined));
      const dropped = async () => (await cp.cp.metrics.samples(M.auditDropped)).find((x) => x.labels.sink === 'postgres')?.value ?? 0;
      // At most the buffer and one batch in flight are held.
      expect(await dropped()).toBeGreaterThanOrEqual(N - 2 * BUFFER);
      await locker.query('ROLLBACK');
      await until('writes to work again', async () => (cp.logs.some((l) => l.includes('audit log: writes to PostgreSQL working again')) ? true : undefined));
      await cp.cp.audit.flush();
      const written = (await pgc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM knowledgefs_audit WHERE session = $1`, [s.sessionId], 'outage'))[0]?.n ?? 0;
      // Every decision is in the table or counted as dropped: none written twice, none lost silently.
      expect(written + (await dropped())).toBe(N + 1);
      expect(cp.logs.filter((l) => l.includes('failing')).length).toBe(1);
      expect(cp.logs.filter((l) => l.includes('working again')).length).toBe(1);
    } finally {
      await locker.end().catch(() => undefined);
      await cp.close();
    }
  });
});

describe('--audit-log -', () => {
  it('puts only JSON lines on stdout, each with its replica; "listening on" goes to stderr', async () => {
    const cp = await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: ['--audit-log', '-', '--state', `${dir}/.knowledgefs/stdout-state.json`] });
    spawned.push(cp);
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    expect(await grant(cp.url, s.token, 'team_search')).toBe(200);
    expect(await grant(cp.url, s.token, 'team_pay')).toBe(404); // denied: not disclosed
    await until('two audit lines', async () => (cp.stdout.split('\n').filter(Boolean).length >= 2 ? true : undefined));
    await cp.kill('SIGTERM');
    const records = cp.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditRecord);
    expect(records.map((r) => [r.scope, r.result])).toEqual([
      ['team_search', 'allow'],
      ['team_pay', 'deny'],
    ]);
    expect(records.every((r) => /^[^:]+:p\d+$/.test(r.replica))).toBe(true);
    expect(cp.stderr).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
  });
});
