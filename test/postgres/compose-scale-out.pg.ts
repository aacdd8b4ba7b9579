// docker/compose.scale-out.yaml without a Docker daemon: what it wires
// together agrees (the proxy's upstreams are the replica services, the
// runner talks to the proxy, every flag exists), and the commands it runs
// work: `publish` and two replicas are started here with the compose file's
// own arguments and environment (hosts swapped for local PostgreSQL and
// s3rver), and a mount recorded through one replica shows in the other's plan.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, REPO_ROOT, spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { run, waitFor } from '../helpers/mount.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';
import { S3RVER_ENV, startS3, type TestS3 } from '../helpers/s3rver.js';

const compose = readFileSync(join(REPO_ROOT, 'docker/compose.scale-out.yaml'), 'utf8');
const nginx = readFileSync(join(REPO_ROOT, 'docker/scale-out/nginx.conf'), 'utf8');

/** The block of one top-level service (or the `x-replica` anchor), up to the next one. */
function block(name: string): string {
  // Services sit under `services:` (two spaces); the x- anchors at the top level.
  const m = new RegExp(`^(${name.startsWith('x-') ? '' : '  '})${name}:`, 'm').exec(compose);
  expect(m, name).not.toBeNull();
  const indent = (m?.[1] ?? '').length;
  const rest = compose.slice((m?.index ?? 0) + (m?.[0].length ?? 0));
  // The block ends at the next key indented no deeper than its own.
  const end = rest.search(new RegExp(`^ {0,${indent}}[a-z][a-z-]*:`, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

function command(name: string): string[] {
  const m = /\n\s+command: (\[.*\])\n/.exec(block(name));
  expect(m, `${name} command`).not.toBeNull();
  return JSON.parse(m?.[1] ?? '[]') as string[];
}

function environment(name: string): Record<string, string> {
  const env: Record<string, string> = {};
  const m = /\n\s+environment:[^\n]*\n((?:\s{4,}(?:[A-Z_]+: |# )[^\n]+\n)+)/.exec(block(name));
  for (const line of (m?.[1] ?? '').split('\n')) {
    const kv = /^\s+([A-Z_]+): (.+)$/.exec(line);
    if (kv) env[kv[1] as string] = (kv[2] as string).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
  }
  return env;
}

const help = async (...args: string[]) => (await run(process.execPath, [BIN, ...args, '--help'])).stdout;

describe('docker/compose.scale-out.yaml', () => {
  it('the proxy fronts exactly the replica services, and the runner and session talk to the proxy', () => {
    const upstreams = [...nginx.matchAll(/^\s+server ([a-z-]+):7420\b/gm)].map((m) => m[1]);
    expect(upstreams).toEqual(['replica-a', 'replica-b']);
    for (const u of upstreams) expect(block(u as string)).toContain('<<: *replica');
    expect(nginx).toMatch(/listen 7420;/);
    expect(Number(/proxy_read_timeout (\d+)s/.exec(nginx)?.[1])).toBeGreaterThan(30); // longer than a plan long-poll
    expect(environment('runner')['KNOWLEDGEFS_SERVER']).toBe('http://proxy:7420');
    expect(block('session')).toContain('--server http://proxy:7420');
    expect(block('proxy')).toContain('./scale-out/nginx.conf:/etc/nginx/nginx.conf:ro');
  });

  it('passes only flags `serve` and `publish` have; the state URL is in the environment, not the arguments', async () => {
    const [serveHelp, publishHelp] = await Promise.all([help('serve'), help('publish')]);
    for (const flag of command('x-replica').filter((a) => a.startsWith('--'))) expect(serveHelp, flag).toMatch(new RegExp(`^\\s+${flag} `, 'm'));
    for (const flag of command('publish').filter((a) => a.startsWith('--'))) expect(publishHelp, flag).toMatch(new RegExp(`^\\s+${flag} `, 'm'));
    expect(command('x-replica').join(' ')).not.toMatch(/postgres:\/\//);
    expect(environment('x-replica')['KNOWLEDGEFS_STATE_URL']).toMatch(/^postgres:\/\/knowledgefs:[^@]+@postgres:5432\/knowledgefs$/);
  });
});

describe('the compose commands, run here', () => {
  let pgc: PgCluster;
  let s3: TestS3;
  let work: string;
  const replicas: SpawnedControlPlane[] = [];
  const ADMIN = 'kfsadmin_compose_0123456789abcdef';
  const PASSWORD = 'compose-pg-secret';

  beforeAll(async () => {
    [pgc, s3, work] = await Promise.all([startPostgres(), startS3('knowledge'), mkdtemp(join(tmpdir(), 'kfs-compose-'))]);
    await pgc.createDatabase('knowledgefs');
    await writeFile(join(work, 'admin-token'), `${ADMIN}\n`, { mode: 0o600 });
  });

  afterAll(async () => {
    for (const r of replicas) await r.kill('SIGKILL').catch(() => undefined);
    await pgc?.destroy();
    await s3?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** The compose file's words with its hosts, paths and secrets swapped for this machine's. */
  const local = (word: string) =>
    word
      .replace('http://minio:9000', s3.endpoint)
      .replace(/^\/data$/, join(REPO_ROOT, 'examples/knowledge-base'))
      .replace('/run/secrets/kfs-admin-token', join(work, 'admin-token'))
      .replace('/var/lib/knowledgefs/', `${work}/`)
      .replace('kfs-demo-secret', S3RVER_ENV.AWS_SECRET_ACCESS_KEY)
      .replace(/^knowledgefs$/, S3RVER_ENV.AWS_ACCESS_KEY_ID)
      .replace(/^postgres:\/\/knowledgefs:[^@]+@postgres:5432\/knowledgefs$/, `postgres://postgres:${PASSWORD}@127.0.0.1:${pgc.port}/knowledgefs`);

  const localEnv = (name: string) => Object.fromEntries(Object.entries(environment(name)).map(([k, v]) => [k, local(v)]));

  it('publish, then two replicas on the published store and one PostgreSQL: a mount through A is in B\'s plan', async () => {
    // The publish service's entrypoint is `knowledgefs publish`.
    const published = await run(process.execPath, [BIN, 'publish', ...command('publish').map(local)], { env: localEnv('publish'), timeoutMs: 120_000 });
    const out = published.stdout + published.stderr;
    expect(published.code, out).toBe(0);
    expect(out).toMatch(/published s3:\/\/knowledge\/kfs/);

    const args = command('x-replica').map(local);
    const listen = args.indexOf('--listen');
    args.splice(listen, 2); // the helper listens on a free local port
    for (let i = 0; i < 2; i++) {
      const audit = args.map((a) => a.replace('audit.log', `audit-${i}.log`));
      replicas.push(await spawnControlPlane({ adminToken: ADMIN, env: localEnv('x-replica'), args: audit }));
    }
    const [a, b] = replicas as [SpawnedControlPlane, SpawnedControlPlane];
    const s = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const auth = { authorization: `Bearer ${s.token}` };
    const read = await fetch(`${b.url}/v1/read`, { method: 'POST', headers: auth, body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
    expect(read.status).toBe(200);
    const mounted = await waitFor(async () => {
      const plan = (await (await fetch(`${a.url}/v1/plan?threshold=1`, { headers: auth })).json()) as { mounted: string[] };
      return plan.mounted.length > 0 ? plan.mounted : null;
    }, 5_000, 50);
    expect(mounted).toEqual(['search']);
    for (const r of replicas) {
      expect(r.stderr).toMatch(/live sessions in PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1/);
      expect(r.stderr).not.toContain(PASSWORD);
    }
  });
});
