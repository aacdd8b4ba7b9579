// The whole scale-out mode with real servers: three `knowledgefs serve`
// replicas serving a publication from an S3-protocol server (s3rver) with
// session state in PostgreSQL, and a real FUSE mount given all three.
// - mount through A (the read tool), plan through B;
// - `kill -9` of the replica the mount uses during `grep -r`: grep completes
//   with every file whole and no error;
// - a new publication reaches the mount through the replicas left, and the
//   reminder (through another replica than the read) names the edited file.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Plan } from '../../src/core/session/plan.js';
import { publishTo } from '../helpers/bucket.js';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile } from '../helpers/data-dir.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';
import { startS3, type TestS3 } from '../helpers/s3rver.js';
import { filesSpec, makeCorpus, versionsOf, type CorpusFile } from '../faults/corpus.js';
import { EVERY_OPEN_FETCHES, grepThroughKill } from './grep-through-kill.js';

const TEAMS = Array.from({ length: 6 }, (_, i) => `t${String(i).padStart(2, '0')}`);
const ADMIN = 'kfsadmin_scaleout_0123456789abcdef';
const PREFIX = 'kfs';

fuseSuite('scale-out: S3 publication + PostgreSQL state + three replicas + a real mount', () => {
  let pgc: PgCluster;
  let s3: TestS3;
  let dir: string;
  let corpus: CorpusFile[];
  const replicas: SpawnedControlPlane[] = [];
  const mounts: MountHandle[] = [];
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  beforeAll(async () => {
    [pgc, s3] = await Promise.all([startPostgres(), startS3()]);
    const stateUrl = await pgc.createDatabase('scaleout');
    corpus = makeCorpus(['account', ...TEAMS.map((t) => `team_${t}`)], 20, 300);
    dir = await makeDataDir({
      teams: { ...Object.fromEntries(TEAMS.map((t) => [t, t.toUpperCase()])), ledger: 'Ledger' },
      users: { alice: { teams: [...TEAMS, 'ledger'] } },
      files: { ...filesSpec(corpus), 'teams/ledger/DUTY.md': '# Ledger v1\n' },
    });
    await publishTo(s3, PREFIX, dir);
    for (let i = 0; i < 3; i++) {
      replicas.push(
        await spawnControlPlane({
          adminToken: ADMIN,
          env: s3.env,
          args: ['--store', `s3://${s3.bucket}/${PREFIX}`, '--publication-poll', '200ms', '--state', stateUrl, '--state-heartbeat', '200ms', '--audit-log', `${dir}/.knowledgefs/audit-${i}.log`],
        }),
      );
    }
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop().catch(() => undefined);
    for (const r of replicas) await r.kill('SIGKILL').catch(() => undefined);
    await pgc?.destroy();
    await s3?.close();
    if (dir) await removeDataDir(dir);
  });

  it('mount through A, plan through B', async () => {
    const [a, b] = replicas as [SpawnedControlPlane, SpawnedControlPlane];
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 't00' });
    const before = await fetch(`${b.url}/v1/plan?threshold=1`, { headers: auth(s.token) });
    expect(((await before.json()) as { mounted: string[] }).mounted).toEqual([]);
    const read = await fetch(`${a.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_ledger/DUTY.md', mount: true }) });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ mounted: true });
    const after = await waitFor(async () => {
      const body = (await (await fetch(`${b.url}/v1/plan?threshold=1`, { headers: auth(s.token) })).json()) as { mounted: string[]; scopes: { scope: string }[] };
      return body.mounted.length > 0 ? body : null;
    }, 5_000, 20);
    expect(after?.mounted).toEqual(['ledger']);
    expect(after?.scopes.map((x) => x.scope)).toContain('team_ledger');
  });

  it('kill -9 of the serving replica during grep -r, then a new publication reaches the mount through the others', async () => {
    const [a, b, c] = replicas as [SpawnedControlPlane, SpawnedControlPlane, SpawnedControlPlane];
    const s = await b.createSession({ kind: 'personal', creator: 'alice' });
    const m = await startMount({
      serverUrl: [a.url, b.url, c.url].join(','),
      token: s.token,
      args: EVERY_OPEN_FETCHES,
    });
    mounts.push(m);
    const versions = versionsOf(corpus);
    versions.set('team_ledger/DUTY.md', ['# Ledger v1\n']);
    await grepThroughKill(m, a, versions, corpus.length + 1);

    // Read through the mount's read tool (goes to B or C), then publish an edit.
    const readTool = await run(process.execPath, [BIN, 'read', 'knowledge/team_ledger/DUTY.md', '--socket', m.socketPath], { cwd: m.dir, timeoutMs: 30_000 });
    expect(readTool.code, readTool.stderr).toBe(0);
    await writeDataFile(dir, 'teams/ledger/DUTY.md', '# Ledger v2\n');
    await publishTo(s3, PREFIX, dir);
    const seen = await waitFor(async () => {
      const r = await run('cat', ['team_ledger/DUTY.md'], { cwd: m.mountpoint, timeoutMs: 10_000 });
      return r.stdout === '# Ledger v2\n' ? r.stdout : null;
    }, 15_000);
    expect(seen).toBe('# Ledger v2\n');
    // Each replica follows publications on its own poll, so the mount may have
    // seen v2 through B while C still serves v1. Wait until C's plan has v2
    // (a plan changes no state); then C's reminder must name the edit.
    const v2 = createHash('sha256').update('# Ledger v2\n').digest('hex');
    const cHasV2 = await waitFor(async () => {
      const plan = (await (await fetch(`${c.url}/v1/plan?threshold=1000000000`, { headers: auth(s.token) })).json()) as Plan;
      const ledger = plan.scopes.find((x) => x.scope === 'team_ledger');
      return ledger?.files.some((f) => f.path === 'DUTY.md' && f.sha256 === v2) === true ? true : null;
    }, 10_000, 50);
    expect(cHasV2, 'replica C never saw the new publication').toBe(true);
    // The reminder, asked of whichever replica is left, names the edited file once.
    const reminder = (await (await fetch(`${c.url}/v1/reminder?today=2026-01-01`, { headers: auth(s.token) })).json()) as { changed: string[] };
    expect(reminder.changed).toEqual(['team_ledger/DUTY.md']);
    const again = (await (await fetch(`${b.url}/v1/reminder?today=2026-01-01`, { headers: auth(s.token) })).json()) as { changed: string[] };
    expect(again.changed).toEqual([]);
    expect(m.child.exitCode).toBeNull();
  }, 180_000);
});
