// The images of docker/Dockerfile, built and run for real with podman
// (`npm run test:images`): both images build; a control-plane container
// becomes healthy and creates a session; runner containers mount knowledge/,
// as root and with KNOWLEDGEFS_RUN_AS=agent, and the command reads it with
// ls, cat, grep -r and the read tool; then docker/compose.yaml's flow under
// podman-compose. The base image is a local stand-in when no image of its
// name exists (base-image.ts). Containers are removed even on failure.
//
// Environment:
//   KNOWLEDGEFS_TEST_NODE_IMAGE  build with --build-arg NODE_IMAGE=this
//                                (default: the Dockerfile's default)
//   KNOWLEDGEFS_TEST_CA_BUNDLE   CA bundle given to the build as secret `ca`
//                                (default /etc/ssl/certs/ca-certificates.crt
//                                when it exists; '' gives none)

import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/control-plane.js';
import { ensureBaseImage } from './base-image.js';
import { containersEnv, ensureContainerTools, removeContainersConf, run, say, seconds, type RunOptions } from './podman.js';
import { expectRunnerOutput, RUNNER_SCRIPT } from './runner-checks.js';

const DOCKERFILE = join(REPO_ROOT, 'docker', 'Dockerfile');
const COMPOSE_FILE = join(REPO_ROOT, 'docker', 'compose.yaml');
const compose = readFileSync(COMPOSE_FILE, 'utf8');
const imageOf = (service: string): string => {
  const m = new RegExp(`\\n  ${service}:\\n(?:    .*\\n)*?    image: (\\S+)`).exec(compose);
  if (!m?.[1]) throw new Error(`docker/compose.yaml: no image: for service ${service}`);
  return m[1];
};
const RUNNER_IMAGE = imageOf('runner');
const CONTROL_PLANE_IMAGE = imageOf('control-plane');
const DEFAULT_NODE_IMAGE = /^ARG NODE_IMAGE=(\S+)$/m.exec(readFileSync(DOCKERFILE, 'utf8'))?.[1] ?? 'node:24-slim';
const NODE_IMAGE = process.env.KNOWLEDGEFS_TEST_NODE_IMAGE || DEFAULT_NODE_IMAGE;
const CA_BUNDLE = process.env.KNOWLEDGEFS_TEST_CA_BUNDLE ?? (existsSync('/etc/ssl/certs/ca-certificates.crt') ? '/etc/ssl/certs/ca-certificates.crt' : '');

const PREFIX = 'kfs-images-test';
const NETWORK = `${PREFIX}-net`;
const CP = `${PREFIX}-cp`;
const CONTAINERS = [CP, `${PREFIX}-runner-root`, `${PREFIX}-runner-agent`];
const PROJECT = 'kfsimagestest';
/** The runner's needs for a FUSE mount, as in docker/compose.yaml. */
const FUSE_ARGS = ['--device', '/dev/fuse', '--cap-add', 'SYS_ADMIN', '--security-opt', 'apparmor=unconfined', '--init'];

const env = containersEnv();
const podman = (args: readonly string[], o: RunOptions = {}) => run('podman', args, { env, ...o });
const report: string[] = [];
let tmp = '';
let composePort = 0;
let composeUp = false;

const composeCmd = (args: readonly string[], o: RunOptions = {}) =>
  run('podman-compose', ['-p', PROJECT, '-f', COMPOSE_FILE, ...args], { env: { ...env, KFS_PORT: String(composePort) }, cwd: REPO_ROOT, ...o });

/** Removes what the tests start: containers with their anonymous volumes, the compose project, both networks. */
async function removeContainers(): Promise<void> {
  for (const name of CONTAINERS) await podman(['rm', '-f', '-v', '-t', '2', name], { allowFailure: true });
  if (composeUp) await composeCmd(['down', '-v', '-t', '2'], { allowFailure: true });
  // podman-compose 1.0 leaves its project network behind.
  for (const net of [NETWORK, `${PROJECT}_default`]) await podman(['network', 'rm', '-f', net], { allowFailure: true });
}

const imageId = async (image: string): Promise<string> =>
  (await podman(['image', 'inspect', '--format', '{{.Id}}', image], { allowFailure: true })).stdout.trim();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const sizeOf = async (image: string): Promise<string> =>
  `${(Number((await podman(['image', 'inspect', '--format', '{{.Size}}', image])).stdout.trim()) / 2 ** 20).toFixed(0)} MiB`;

async function build(target: string, tag: string): Promise<void> {
  const start = performance.now();
  const args = [
    'build', '--pull=never', '--format', 'docker',
    '-f', DOCKERFILE, '--ignorefile', `${DOCKERFILE}.dockerignore`,
    '--target', target, '-t', tag,
    '--build-arg', `NODE_IMAGE=${NODE_IMAGE}`,
    ...(CA_BUNDLE ? ['--secret', `id=ca,src=${CA_BUNDLE}`] : []),
    REPO_ROOT,
  ];
  say(`building ${tag} (--target ${target}, FROM ${NODE_IMAGE})…`);
  const before = await imageId(tag);
  let cached = 0;
  await podman(args, {
    onLine: (line) => {
      if (/^(\[\d+\/\d+\] )?STEP \d+\/\d+/.test(line)) say(`  ${line.slice(0, 110)}`);
      if (line.startsWith('--> Using cache')) cached += 1;
    },
  });
  // The image this build replaced would only take up space (its layers stay as the build cache).
  if (before && before !== (await imageId(tag))) await podman(['rmi', before], { allowFailure: true });
  report.push(`${tag}: built in ${seconds(start)} (${cached} steps from cache), ${await sizeOf(tag)}`);
}

/** Waits for the image's HEALTHCHECK to pass (podman schedules none without systemd, so it is run here). */
async function waitHealthy(container: string, timeoutMs = 60_000): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < timeoutMs) {
    if ((await podman(['healthcheck', 'run', container], { allowFailure: true })).code === 0) return performance.now() - start;
    const state = (await podman(['inspect', '--format', '{{.State.Status}}', container], { allowFailure: true })).stdout.trim();
    if (state !== 'running') break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const logs = await podman(['logs', container], { allowFailure: true });
  throw new Error(`${container} not healthy within ${timeoutMs} ms; its logs:\n${logs.stdout}${logs.stderr}`);
}

/** Runs a runner container with the checks' script; returns its output and the time from `podman run` to the command. */
async function runRunner(name: string, extraArgs: readonly string[]): Promise<{ out: string; toCommandMs: number }> {
  const start = performance.now();
  let toCommandMs = -1;
  const r = await podman([
    'run', '--rm', '--name', name, '--network', NETWORK, ...FUSE_ARGS,
    '-e', `KNOWLEDGEFS_SERVER=http://${CP}:7420`, '-e', 'KNOWLEDGEFS_TOKEN_FILE=/tokens/runner-token',
    '-v', `${join(tmp, 'tokens')}:/tokens:ro`, ...extraArgs,
    RUNNER_IMAGE, 'sh', '-c', RUNNER_SCRIPT,
  ], { onLine: (line) => { if (toCommandMs < 0 && line.startsWith('user=')) toCommandMs = performance.now() - start; } });
  return { out: `${r.stdout}\n${r.stderr}`, toCommandMs };
}

beforeAll(async () => {
  ensureContainerTools();
  await removeContainers();
  tmp = mkdtempSync(join(tmpdir(), 'kfs-images-'));
  writeFileSync(join(tmp, 'admin-token'), 'images-test-admin-token-0123456789abcdef', { mode: 0o644 });
  report.push(await ensureBaseImage(NODE_IMAGE, env));
}, 900_000);

afterAll(async () => {
  await removeContainers();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  removeContainersConf();
  say(`report:\n  ${report.join('\n  ')}`);
}, 120_000);

describe.sequential('docker/Dockerfile under podman', () => {
  it('builds the runner image', async () => { await build('runner', RUNNER_IMAGE); }, 900_000);

  it('builds the control-plane image', async () => { await build('control-plane', CONTROL_PLANE_IMAGE); }, 600_000);

  it('runs the control plane as node; it becomes healthy and creates a session', async () => {
    await podman(['network', 'create', NETWORK]);
    const start = performance.now();
    await podman([
      'run', '-d', '--name', CP, '--network', NETWORK,
      '-v', `${join(REPO_ROOT, 'examples', 'knowledge-base')}:/data:ro`,
      '-v', `${join(tmp, 'admin-token')}:/run/secrets/kfs-admin-token:ro`,
      CONTROL_PLANE_IMAGE,
    ]);
    const healthyMs = await waitHealthy(CP);
    report.push(`control plane: healthy ${((performance.now() - start) / 1000).toFixed(1)} s after podman run (health check passed after ${(healthyMs / 1000).toFixed(1)} s of trying)`);
    expect((await podman(['exec', CP, 'id', '-un'])).stdout.trim()).toBe('node');
    const created = await podman(['exec', CP, 'knowledgefs', 'session', 'create', '--server', 'http://127.0.0.1:7420',
      '--admin-token-file', '/run/secrets/kfs-admin-token', '--kind', 'personal', '--creator', 'alice', '--team', 'payments']);
    const { token } = JSON.parse(created.stdout) as { token: string };
    expect(token).toMatch(/^kfs_/);
    mkdirSync(join(tmp, 'tokens'));
    writeFileSync(join(tmp, 'tokens', 'runner-token'), token);
    chmodSync(join(tmp, 'tokens', 'runner-token'), 0o400);
  }, 120_000);

  it('a runner mounts knowledge/ as root: ls, cat, grep -r and the read tool see what alice may load', async () => {
    const { out, toCommandMs } = await runRunner(`${PREFIX}-runner-root`, []);
    expectRunnerOutput(out, 'root');
    expect(out).toMatch(/runner-entrypoint: mounted \/workspace\/knowledge \(\d+ files, 3 scopes\)/);
    report.push(`runner as root: podman run → command ${(toCommandMs / 1000).toFixed(1)} s`);
  }, 120_000);

  it('a runner with KNOWLEDGEFS_RUN_AS=agent: the command runs as agent and reads the same, not the token', async () => {
    const { out, toCommandMs } = await runRunner(`${PREFIX}-runner-agent`, ['-e', 'KNOWLEDGEFS_RUN_AS=agent']);
    expectRunnerOutput(out, 'agent');
    report.push(`runner as agent: podman run → command ${(toCommandMs / 1000).toFixed(1)} s`);
  }, 120_000);

  it('docker/compose.yaml under podman-compose: control plane, session job, runner as agent', async () => {
    composePort = await freePort();
    await run('sh', [join(REPO_ROOT, 'docker', 'make-secrets.sh')]);
    const start = performance.now();
    composeUp = true;
    await composeCmd(['up', '-d', '--no-build', 'control-plane']);
    // podman-compose ignores depends_on conditions: wait for health, then run the session job, then the runner.
    await waitHealthy(`${PROJECT}_control-plane_1`);
    const health = await fetch(`http://127.0.0.1:${composePort}/healthz`);
    expect(health.status).toBe(200);
    await composeCmd(['run', '--rm', '--no-deps', '-T', 'session']);
    const r = await composeCmd(['run', '--rm', '--no-deps', '-T', 'runner', 'sh', '-c', RUNNER_SCRIPT]);
    expectRunnerOutput(`${r.stdout}\n${r.stderr}`, 'agent');
    report.push(`compose flow: up → runner done in ${seconds(start)}`);
  }, 300_000);
});
