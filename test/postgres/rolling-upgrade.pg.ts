// A rolling upgrade: replicas of the previous release (0.1.0, built from this
// clone's git history by test/helpers/previous-release.ts, cached in .cache/)
// beside replicas of this one on one PostgreSQL database. The previous
// release keeps starting on a database this one migrated (its expand steps
// are recorded where 0.1.0 does not count them), also on one the build before
// this scheme migrated once this release has moved those records; a contract
// step stops it. Sessions created on either release, used, mounted and
// revoked on the other, are seen and refused by both within the bound; this
// release's mount daemon takes the same plan from both (rows from 0.1.0).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ColumnarSnapshot } from '../../src/core/session/plan-columns.js';
import { HttpControlClient } from '../../src/daemon/control-plane/http-control-client.js';
import { CONTRACT_TABLE, EXPAND_TABLE, loadMigrations } from '../../src/server/state/postgres/pg-migrations.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { spawnControlPlane, startControlPlane, type SpawnedControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { previousRelease, type PreviousRelease } from '../helpers/previous-release.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
let previous: PreviousRelease;
const HEARTBEAT_MS = 200;
const ADMIN = 'kfsadmin_upgrade_0123456789abcdef';
const current: TestControlPlane[] = [];
const spawned: SpawnedControlPlane[] = [];

beforeAll(async () => {
  previous = previousRelease();
  process.stderr.write(`rolling upgrade: release ${previous.version} (${previous.commit}) ${previous.built ? 'built' : 'from .cache'} in ${(previous.ms / 1000).toFixed(1)} s\n`);
  pgc = await startPostgres();
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search' },
    users: { alice: { teams: ['payments', 'search'] } },
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/search/DUTY.md': '# Search\n',
      'teams/search/runbooks/reindex.md': 'reindex steps\n',
    },
  });
});

afterAll(async () => {
  for (const cp of spawned) await cp.kill('SIGKILL').catch(() => undefined);
  for (const cp of current) await cp.close().catch(() => undefined);
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
});

/** A replica of this release, in this process. */
async function currentReplica(database: string): Promise<TestControlPlane> {
  const cp = await startControlPlane({
    dataDir: dir,
    adminToken: ADMIN,
    stateUrl: pgc.url(database),
    stateHeartbeatMs: HEARTBEAT_MS,
    auditLog: `${dir}/.knowledgefs/audit-current-${current.length}.log`,
  });
  current.push(cp);
  return cp;
}

/** A replica of the previous release: its own `serve`, as a child process. */
async function previousReplica(database: string): Promise<SpawnedControlPlane> {
  const cp = await spawnControlPlane({
    bin: previous.bin,
    dataDir: dir,
    adminToken: ADMIN,
    args: ['--state', pgc.url(database), '--state-heartbeat', `${HEARTBEAT_MS}ms`, '--audit-log', `${dir}/.knowledgefs/audit-previous-${spawned.length}.log`],
  });
  spawned.push(cp);
  return cp;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function sessionStatus(url: string, token: string): Promise<number> {
  return (await fetch(`${url}/v1/session`, { headers: auth(token) })).status;
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

/** Revokes through `via` and waits until both replicas refuse the token: within 2 × heartbeat (plus slack for a loaded machine). */
async function revokeAndExpectRefusedBy(via: { url: string }, s: { sessionId: string; token: string }, both: { url: string }[]): Promise<void> {
  const revokedAt = Date.now();
  const del = await fetch(`${via.url}/v1/admin/sessions/${s.sessionId}`, { method: 'DELETE', headers: auth(ADMIN) });
  expect(del.status).toBe(204);
  for (const cp of both) await until(`${cp.url} refusing the revoked token`, () => sessionStatus(cp.url, s.token), (st) => st === 401, 2 * HEARTBEAT_MS + 1_000);
  expect(Date.now() - revokedAt).toBeLessThan(2 * HEARTBEAT_MS + 1_000);
}

describe(`rolling upgrade from the previous release`, () => {
  it('the previous release keeps starting and serving on a database this release migrated; sessions cross both ways', async () => {
    await pgc.createDatabase('rolling');
    // Before the upgrade: a replica of the previous release on a fresh database.
    const prev = await previousReplica('rolling');
    // The first replica of this release applies its expand steps and says so.
    const next = await currentReplica('rolling');
    expect(next.logs).toContain('session state: applied migrations 002_audit.sql (expand), 003_replicas_gc.sql (expand)');
    // A replica of the previous release restarting mid-rollout starts again.
    await prev.restart();

    // Created on the previous release: used and mounted through this one, seen mounted there.
    const older = await prev.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect(await sessionStatus(next.url, older.token)).toBe(200);
    const read = await fetch(`${next.url}/v1/read`, { method: 'POST', headers: auth(older.token), body: JSON.stringify({ path: 'team_search/runbooks/reindex.md', mount: true }) });
    expect(read.status).toBe(200);
    await until(
      'the previous release seeing the team mounted through this one',
      async () => ((await (await fetch(`${prev.url}/v1/session`, { headers: auth(older.token) })).json()) as { mounted: string[] }).mounted,
      (m) => m.includes('search'),
    );
    // Created on this release (its `created` notification is new to 0.1.0): used on the previous one.
    const newer = await next.createSession({ kind: 'personal', creator: 'alice' });
    expect(await sessionStatus(prev.url, newer.token)).toBe(200);
    // This release's mount daemon asks for the plan packed (and as columns): the previous release answers rows, which it takes, and both are one plan.
    const plans = [];
    for (const cp of [prev, next]) {
      const client = new HttpControlClient({ serverUrl: cp.url, token: older.token, requestTimeoutMs: 5_000 });
      try {
        plans.push(await client.plan({ threshold: 1_000_000 }));
      } finally {
        await client.close();
      }
    }
    const [fromPrevious, fromThis] = plans;
    expect(fromPrevious?.scopes.some((sc) => sc instanceof ColumnarSnapshot)).toBe(false);
    expect(fromThis?.scopes.every((sc) => sc instanceof ColumnarSnapshot)).toBe(true);
    expect(fromThis?.version).toBe(fromPrevious?.version);
    expect(fromThis?.scopes.map((sc) => [sc.scope, sc.version, sc.files])).toEqual(fromPrevious?.scopes.map((sc) => [sc.scope, sc.version, sc.files]));

    await revokeAndExpectRefusedBy(next, older, [prev, next]);
    await revokeAndExpectRefusedBy(prev, newer, [prev, next]);
  });

  it('a database the build before this scheme migrated: the previous release refuses it until this release moved the records, then starts; a contract step stops it again', async () => {
    await pgc.createDatabase('premoved');
    // What that build left: every migration recorded in knowledgefs_schema_migrations.
    await pgc.sql(`CREATE TABLE ${CONTRACT_TABLE} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`, [], 'premoved');
    for (const m of await loadMigrations()) {
      await pgc.sql(m.sql, [], 'premoved');
      await pgc.sql(`INSERT INTO ${CONTRACT_TABLE} (version, name) VALUES ($1, $2)`, [m.version, m.name], 'premoved');
    }
    await expect(previousReplica('premoved')).rejects.toThrow('the session-state schema is at version 3, newer than this knowledgefs knows (1)');

    const next = await currentReplica('premoved');
    expect(next.logs.filter((l) => l.includes('moved the record'))).toHaveLength(1);
    const prev = await previousReplica('premoved');
    const s = await next.createSession({ kind: 'team', creator: 'alice', team: 'search' });
    expect(await sessionStatus(prev.url, s.token)).toBe(200);
    expect((await pgc.sql<{ version: number }>(`SELECT version FROM ${EXPAND_TABLE} ORDER BY version`, [], 'premoved')).map((r) => r.version)).toEqual([2, 3]);

    // A contract step (a later release's, after every replica runs it) is where 0.1.0 looks: it refuses to start.
    await pgc.sql(`INSERT INTO ${CONTRACT_TABLE} (version, name) VALUES (4, '004_drop_something.sql')`, [], 'premoved');
    await expect(previousReplica('premoved')).rejects.toThrow('the session-state schema is at version 4, newer than this knowledgefs knows (1)');
  });
});
