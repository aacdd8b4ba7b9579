// podman for the image tests: the Debian packages when missing, this
// machine's engine settings, and a runner for podman commands that keeps
// their output for the error message.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The Debian packages the image tests use, with a command each one provides. */
const TOOLS: ReadonlyArray<readonly [command: string, pkg: string]> = [
  ['podman', 'podman'],
  ['buildah', 'buildah'],
  ['runc', 'runc'],
  ['newuidmap', 'uidmap'],
  ['slirp4netns', 'slirp4netns'],
  ['mmdebstrap', 'mmdebstrap'],
  ['podman-compose', 'podman-compose'],
];

export const say = (msg: string): void => { process.stderr.write(`test:images: ${msg}\n`); };

const hasCommand = (name: string): boolean => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;

/** Installs the missing container tools with apt-get (root, Debian), or says which are missing. */
export function ensureContainerTools(): void {
  const missing = TOOLS.filter(([cmd]) => !hasCommand(cmd)).map(([, pkg]) => pkg);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) throw new Error(`missing Debian package(s) ${missing.join(' ')}; as root: apt-get install -y ${missing.join(' ')}`);
  say(`installing ${missing.join(' ')} (apt-get)…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update', '-qq'], ['install', '-y', '-qq', '-o', 'DPkg::Lock::Timeout=600', ...missing]]) {
    const r = spawnSync('apt-get', args, { stdio: 'inherit', env });
    if (r.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (exit ${r.status})`);
  }
}

/**
 * Engine settings this machine needs, which belong to the machine and not to
 * the images: runc (crun 1.8 rejects a hybrid cgroup layout), cgroupfs (no
 * systemd), and ulimits within the sandbox's hard limits (no
 * CAP_SYS_RESOURCE: podman's defaults fail with "setrlimit RLIMIT_NOFILE").
 * An existing $CONTAINERS_CONF is kept.
 */
let confDir: string | undefined;

export function containersEnv(): NodeJS.ProcessEnv {
  if (process.env.CONTAINERS_CONF) return { ...process.env, BUILDAH_FORMAT: 'docker' };
  const dir = mkdtempSync(join(tmpdir(), 'kfs-containers-conf-'));
  confDir = dir;
  const file = join(dir, 'containers.conf');
  writeFileSync(file, [
    '[containers]',
    'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    '',
  ].join('\n'));
  // docker format: the OCI format drops HEALTHCHECK.
  return { ...process.env, CONTAINERS_CONF: file, BUILDAH_FORMAT: 'docker' };
}

/** Removes the settings file containersEnv wrote, if it wrote one. */
export function removeContainersConf(): void {
  if (confDir) rmSync(confDir, { recursive: true, force: true });
  confDir = undefined;
}

export interface Run { readonly code: number | null; readonly stdout: string; readonly stderr: string }

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Called with each complete line of stdout and stderr (progress). */
  readonly onLine?: (line: string) => void;
  /** Resolve with a non-zero exit instead of rejecting. */
  readonly allowFailure?: boolean;
}

/** Runs a command, collecting its output; rejects on a non-zero exit with the command and the end of its output. */
export function run(cmd: string, args: readonly string[], o: RunOptions = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: o.env ?? process.env, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let partial = '';
    const lines = (d: string): void => {
      if (!o.onLine) return;
      partial += d;
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) o.onLine(line);
    };
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; lines(d); });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; lines(d); });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0 || o.allowFailure) { resolve({ code, stdout, stderr }); return; }
      const tail = `${stdout}\n${stderr}`.trim().split('\n').slice(-40).join('\n');
      reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${tail}`));
    });
  });
}

/** Milliseconds since `start` as seconds with one decimal, for the report. */
export const seconds = (start: number): string => `${((performance.now() - start) / 1000).toFixed(1)} s`;
