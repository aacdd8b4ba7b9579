// The shipped alert rules, evaluated by a real Prometheus (Debian's) that
// scrapes a real replica on PostgreSQL state and a real mount daemon: while
// everything is healthy nothing fires; once PostgreSQL goes away, the replica
// refuses its runners and the mount's opens fail, and Prometheus fires
// KnowledgefsReplicaRefusing for the replica and KnowledgefsRunnerEIO for
// the runner.
//
// The rules are the file users install, with each `for:` set to 0s so the
// test does not sit out minutes: the expressions, metric names and labels
// are what is checked here; `promtool test rules` (test/alert-rules.test.ts)
// checks the `for` timing on simulated time.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { REPO_ROOT, spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { fuseUnavailableReason, run, startMount, suiteNeeding, waitFor, type MountHandle } from '../helpers/mount.js';
import { freePort, startPostgres, type PgCluster } from '../helpers/postgres.js';

const prometheusMissing = spawnSync('prometheus', ['--version'], { encoding: 'utf8' }).status === 0 ? undefined : 'prometheus is not installed (Debian: apt-get install prometheus)';

interface FiringAlert {
  labels: Record<string, string>;
  state: string;
}

suiteNeeding('FUSE and Prometheus', fuseUnavailableReason() ?? prometheusMissing, 'alerts a real Prometheus evaluates', () => {
  let pgc: PgCluster;
  let dataDir: string;
  let work: string;
  let cp: SpawnedControlPlane;
  let mount: MountHandle;
  let prometheus: ChildProcess | undefined;
  let promUrl: string;
  let replicaTarget: string;
  let mountTarget: string;

  beforeAll(async () => {
    pgc = await startPostgres();
    const stateUrl = await pgc.createDatabase('alerts');
    const files: Record<string, string> = { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' };
    for (let i = 0; i < 20; i++) files[`teams/payments/runbooks/r${i}.md`] = `runbook ${i}\n`;
    dataDir = await makeDataDir({ teams: { payments: 'Payments' }, users: { ops: { teams: ['payments'] } }, files });
    work = await mkdtemp(join(tmpdir(), 'kfs-prom-'));

    const replicaMetrics = await freePort();
    replicaTarget = `127.0.0.1:${replicaMetrics}`;
    cp = await spawnControlPlane({
      dataDir,
      args: ['--state', stateUrl, '--state-heartbeat', '200ms', '--metrics-listen', replicaTarget],
    });
    const session = await cp.createSession({ kind: 'team', team: 'payments', creator: 'ops' });
    const mountMetrics = await freePort();
    mountTarget = `127.0.0.1:${mountMetrics}`;
    // Every open asks the control plane, so its outage shows on the next `cat`.
    mount = await startMount({
      serverUrl: cp.url,
      token: session.token,
      args: ['--metrics-listen', mountTarget, '--grant-ttl', '0', '--cache-size', '0', '--prefetch-content', 'off', '--request-timeout', '1s', '--sync-interval', '500ms'],
    });

    const rules = (await readFile(join(REPO_ROOT, 'deploy', 'prometheus', 'knowledgefs-alerts.yaml'), 'utf8')).replace(/^(\s*)for: \S+$/gm, '$1for: 0s');
    await writeFile(join(work, 'rules.yaml'), rules);
    await writeFile(
      join(work, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        'rule_files: [rules.yaml]',
        'scrape_configs:',
        `  - { job_name: knowledgefs, static_configs: [{ targets: ['${replicaTarget}'] }] }`,
        `  - { job_name: knowledgefs-mount, static_configs: [{ targets: ['${mountTarget}'] }] }`,
        '',
      ].join('\n'),
    );
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    let log = '';
    prometheus = spawn(
      'prometheus',
      [`--config.file=${join(work, 'prometheus.yml')}`, `--storage.tsdb.path=${join(work, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'],
      { cwd: work, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    prometheus.stderr?.setEncoding('utf8').on('data', (s: string) => (log += s));
    await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok === true || undefined, 30_000).catch((err: unknown) => {
      throw new Error(`Prometheus not ready: ${String(err)}\n${log}`);
    });
  });

  afterAll(async () => {
    if (prometheus !== undefined && prometheus.exitCode === null) {
      const exited = new Promise((r) => prometheus?.once('exit', r));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await mount?.stop();
    await cp?.kill('SIGKILL').catch(() => undefined);
    await pgc?.destroy();
    if (dataDir !== undefined) await removeDataDir(dataDir);
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  });

  async function api<T>(path: string): Promise<T> {
    const r = await fetch(`${promUrl}${path}`);
    const body = (await r.json()) as { status: string; data: T };
    expect(body.status).toBe('success');
    return body.data;
  }
  const firing = async (): Promise<FiringAlert[]> => (await api<{ alerts: FiringAlert[] }>('/api/v1/alerts')).alerts.filter((a) => a.state === 'firing');
  const catAll = () => run('sh', ['-c', 'for f in knowledge/team_payments/runbooks/*.md; do cat "$f"; done'], { cwd: mount.dir, timeoutMs: 30_000 });

  it('nothing fires while the replica and the mount are healthy; losing PostgreSQL fires the replica and the runner alerts', async () => {
    await waitFor(async () => {
      const { activeTargets } = await api<{ activeTargets: { health: string; scrapeUrl: string }[] }>('/api/v1/targets');
      return activeTargets.length === 2 && activeTargets.every((t) => t.health === 'up') ? true : undefined;
    }, 30_000);
    const healthy = await catAll();
    expect(healthy.code).toBe(0);
    expect(healthy.stdout).toContain('runbook 19');
    // A few evaluations with traffic flowing: none of these fire.
    const evaluations = async () => (await api<{ groups: { lastEvaluation: string }[] }>('/api/v1/rules')).groups.map((g) => Date.parse(g.lastEvaluation));
    const before = Math.min(...(await evaluations()));
    await waitFor(async () => (Math.min(...(await evaluations())) > before + 3000 ? true : undefined), 30_000);
    const watched = new Set(['KnowledgefsReplicaRefusing', 'KnowledgefsRunnerEIO', 'KnowledgefsServerErrors', 'KnowledgefsSyncFailing']);
    expect((await firing()).filter((a) => watched.has(a.labels.alertname ?? ''))).toEqual([]);

    await pgc.stop('immediate');
    const seen = await waitFor(async () => {
      const failed = await catAll();
      expect(failed.stdout).not.toContain('runbook');
      const alerts = await firing();
      const replica = alerts.find((a) => a.labels.alertname === 'KnowledgefsReplicaRefusing');
      const runner = alerts.find((a) => a.labels.alertname === 'KnowledgefsRunnerEIO');
      return replica !== undefined && runner !== undefined ? { replica, runner } : undefined;
    }, 60_000, 500);
    if (seen === undefined) throw new Error('the alerts never fired');
    expect(seen.replica.labels).toMatchObject({ instance: replicaTarget, severity: 'critical' });
    expect(seen.runner.labels).toMatchObject({ instance: mountTarget, severity: 'critical' });
  });
});
