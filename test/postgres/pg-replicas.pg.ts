// Real `knowledgefs serve` replicas on one PostgreSQL: start-up errors and
// their exit codes, credentials kept out of argv and logs, and crashes:
// `kill -9` of a replica in the middle of concurrent mounts and reads, then
// a PostgreSQL crash (immediate stop) and restart, lose no acknowledged
// mount or read-set entry.

import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { freePort, startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
const spawned: SpawnedControlPlane[] = [];
const ADMIN = 'kfsadmin_replicas_fedcba9876543210';
const TEAMS = Array.from({ length: 12 }, (_, i) => `t${String(i).padStart(2, '0')}`);

beforeAll(async () => {
  // fsync and synchronous_commit on: a PostgreSQL crash must not lose a commit.
  pgc = await startPostgres({ durable: true });
  const files: Record<string, string> = { 'account/DUTY.md': '# Account\n' };
  for (const t of TEAMS) {
    files[`teams/${t}/DUTY.md`] = `# ${t}\n`;
    for (let i = 0; i < 5; i++) files[`teams/${t}/notes/n${i}.md`] = `${t} note ${i}\n`;
  }
  dir = await makeDataDir({
    teams: Object.fromEntries(TEAMS.map((t) => [t, t])),
    users: { alice: { teams: TEAMS } },
    files,
  });
});

afterAll(async () => {
  for (const cp of spawned) await cp.kill('SIGKILL').catch(() => undefined);
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
});

function runServe(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'serve', '--data', dir, '--listen', '127.0.0.1:0', ...args], {
      env: { ...process.env, KNOWLEDGEFS_ADMIN_TOKEN: ADMIN, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
      // Started after all: stop it, the caller checks what it printed.
      if (stdout.includes('listening on')) child.kill('SIGTERM');
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('start-up', () => {
  it('a password in --state is a usage error (exit 2) that says where to put it, and does not echo it', async () => {
    const r = await runServe(['--state', `postgres://kfs:pw-in-argv@127.0.0.1:${pgc.port}/postgres`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--state: the URL carries a password.*\$KNOWLEDGEFS_STATE_URL.*\$PGPASSWORD or ~\/\.pgpass/);
    expect(r.stderr).not.toContain('pw-in-argv');
  });

  it('a password in a query parameter of --state (any spelling, sslpassword too) is refused the same way, without echoing it', async () => {
    for (const param of ['password', 'PassWord', 'sslpassword']) {
      const r = await runServe(['--state', `postgres://kfs@127.0.0.1:${pgc.port}/postgres?sslmode=disable&${param}=pw-in-query`]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--state: the URL carries the query parameter ${param}, which every local user can read on the command line`);
      expect(r.stderr).not.toContain('pw-in-query');
    }
  });

  it('a $KNOWLEDGEFS_STATE_URL with ?password= starts, and the password never reaches the logs', async () => {
    await pgc.createDatabase('cli_query');
    const r = await runServe([], { KNOWLEDGEFS_STATE_URL: `postgres://postgres@127.0.0.1:${pgc.port}/cli_query?password=env-query-secret` });
    expect(r.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(r.stderr).toMatch(/0 live sessions in PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/cli_query\?password=REDACTED/);
    expect(r.stderr + r.stdout).not.toContain('env-query-secret');
    expect(r.code).toBe(0);
  });

  it('a $KNOWLEDGEFS_STATE_URL that is not a postgres:// URL is a usage error', async () => {
    const r = await runServe([], { KNOWLEDGEFS_STATE_URL: '/var/lib/state.json' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\$KNOWLEDGEFS_STATE_URL must be a postgres:\/\/ URL/);
  });

  it('PostgreSQL unreachable: exit 4 naming PostgreSQL, where and why, without the password', async () => {
    const port = await freePort();
    const r = await runServe([], { KNOWLEDGEFS_STATE_URL: `postgres://kfs:env-secret@127.0.0.1:${port}/knowledgefs` });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`session state: cannot connect to PostgreSQL at postgres://kfs@127.0.0.1:${port}/knowledgefs`);
    expect(r.stderr).toMatch(/ECONNREFUSED/);
    expect(r.stderr).not.toContain('env-secret');
  });

  it('starts from $KNOWLEDGEFS_STATE_URL with a password that never reaches the logs', async () => {
    await pgc.createDatabase('cli_start');
    const r = await runServe([], { KNOWLEDGEFS_STATE_URL: `postgres://postgres:env-secret@127.0.0.1:${pgc.port}/cli_start` });
    expect(r.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(r.stderr).toMatch(/session state: applied migrations 001_sessions\.sql/);
    expect(r.stderr).toMatch(/0 live sessions in PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/cli_start/);
    expect(r.stderr + r.stdout).not.toContain('env-secret');
    expect(r.code).toBe(0);
  });
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('crashes', () => {
  it('kill -9 of a replica during concurrent mounts and reads, then a PostgreSQL crash: nothing acknowledged is lost', async () => {
    const url = await pgc.createDatabase('crash');
    const replicaArgs = (n: number) => ['--state', url, '--state-heartbeat', '200ms', '--audit-log', `${dir}/.knowledgefs/crash-audit-${n}.log`];
    const a = await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: replicaArgs(0) });
    const b = await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: replicaArgs(1) });
    spawned.push(a, b);
    const sessions = await Promise.all([0, 1, 2].map(() => a.createSession({ kind: 'personal', creator: 'alice' })));

    // Every (session, path) read through either replica; keep the acknowledged ones.
    const acked: { token: string; sessionId: string; path: string; team: string; mounted: boolean }[] = [];
    const jobs: Promise<void>[] = [];
    let n = 0;
    for (const s of sessions) {
      for (const t of TEAMS) {
        for (const file of ['DUTY.md', 'notes/n0.md', 'notes/n1.md']) {
          const via = n++ % 2 === 0 ? a : b;
          const path = `team_${t}/${file}`;
          jobs.push(
            fetch(`${via.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path, mount: true }) })
              .then(async (res) => {
                if (res.status === 200) acked.push({ ...s, path, team: t, mounted: ((await res.json()) as { mounted: boolean }).mounted });
                else await res.arrayBuffer();
              })
              .catch(() => undefined), // the replica died under this request: not acknowledged
          );
        }
      }
    }
    // Kill A while its requests are in flight.
    await new Promise((r) => setTimeout(r, 30));
    expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
    await Promise.all(jobs);
    expect(acked.length).toBeGreaterThan(0);

    // Then PostgreSQL crashes (no checkpoint) and comes back from its WAL.
    await pgc.stop('immediate');
    await pgc.start();
    await a.restart();

    for (const s of sessions) {
      const rows = await pgc.sql<{ path: string }>('SELECT path FROM knowledgefs_read_set WHERE session_id = $1', [s.sessionId], 'crash');
      const paths = new Set(rows.map((r) => r.path));
      const mine = acked.filter((x) => x.sessionId === s.sessionId);
      for (const x of mine) expect(paths.has(x.path), x.path).toBe(true);
      // Both replicas answer with every acknowledged mount.
      for (const cp of [a, b]) {
        let view: { mounted: string[] } | null = null;
        const deadline = Date.now() + 15_000;
        while (view === null && Date.now() < deadline) {
          const res = await fetch(`${cp.url}/v1/session`, { headers: auth(s.token) }).catch(() => null);
          if (res?.status === 200) view = (await res.json()) as { mounted: string[] };
          else await new Promise((r) => setTimeout(r, 100));
        }
        expect(view, `session view through ${cp.url}`).not.toBeNull();
        for (const team of new Set(mine.map((x) => x.team))) expect(view?.mounted).toContain(team);
        // Each team mounted once, and exactly one acknowledgement said it mounted it.
        expect(new Set(view?.mounted).size).toBe(view?.mounted.length);
      }
      for (const team of new Set(mine.map((x) => x.team))) {
        expect(mine.filter((x) => x.team === team && x.mounted).length).toBeLessThanOrEqual(1);
      }
    }
  });
});
