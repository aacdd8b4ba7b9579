// Three real `knowledgefs serve` replicas on one PostgreSQL and a real FUSE
// mount given all three (`--server A,B,C`): `kill -9` of the replica the
// daemon is using in the middle of `grep -r` costs nothing: grep completes
// with every file whole and exact and no error, and the same daemon goes on
// serving through the replicas that are left (grep again, the read tool).

import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, fuseSuite, run, startMount, type MountHandle } from '../helpers/mount.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';
import { checkGrepOutput, filesSpec, makeCorpus, versionsOf, type CorpusFile } from '../faults/corpus.js';
import { EVERY_OPEN_FETCHES, grepThroughKill } from './grep-through-kill.js';

const TEAMS = Array.from({ length: 8 }, (_, i) => `t${String(i).padStart(2, '0')}`);
const ADMIN = 'kfsadmin_failover_0123456789abcdef';

fuseSuite('replica failover under a real mount', () => {
  let pgc: PgCluster;
  let dir: string;
  let corpus: CorpusFile[];
  const replicas: SpawnedControlPlane[] = [];
  const mounts: MountHandle[] = [];

  beforeAll(async () => {
    pgc = await startPostgres();
    const url = await pgc.createDatabase('failover');
    corpus = makeCorpus(['account', ...TEAMS.map((t) => `team_${t}`)], 25, 400);
    dir = await makeDataDir({
      teams: Object.fromEntries(TEAMS.map((t) => [t, t.toUpperCase()])),
      users: { alice: { teams: TEAMS } },
      files: filesSpec(corpus),
    });
    for (let i = 0; i < 3; i++) {
      replicas.push(
        await spawnControlPlane({ dataDir: dir, adminToken: ADMIN, args: ['--state', url, '--state-heartbeat', '200ms', '--audit-log', `${dir}/.knowledgefs/audit-${i}.log`] }),
      );
    }
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop().catch(() => undefined);
    for (const r of replicas) await r.kill('SIGKILL').catch(() => undefined);
    await pgc?.destroy();
    if (dir) await removeDataDir(dir);
  });

  it('kill -9 of the serving replica during `grep -r`: grep completes, every file whole, no error, no remount', async () => {
    const [a, b, c] = replicas as [SpawnedControlPlane, SpawnedControlPlane, SpawnedControlPlane];
    const session = await b.createSession({ kind: 'personal', creator: 'alice' });
    const m = await startMount({
      serverUrl: [a.url, b.url, c.url].join(','),
      token: session.token,
      args: EVERY_OPEN_FETCHES,
    });
    mounts.push(m);
    const versions = versionsOf(corpus);
    await grepThroughKill(m, a, versions, corpus.length);

    // The same daemon, now on the replicas left: everything again, and the read tool (a POST) works.
    const again = await run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
    expect(again.code).toBe(0);
    expect(checkGrepOutput(again.stdout, versions).complete.length).toBe(corpus.length);
    const first = corpus[0] as CorpusFile;
    const read = await run(process.execPath, [BIN, 'read', `knowledge/${first.mountPath}`, '--socket', m.socketPath], { cwd: m.dir, timeoutMs: 30_000 });
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout).toBe(first.content);
    expect(m.child.exitCode).toBeNull();
  }, 180_000);
});
