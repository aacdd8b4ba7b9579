// Real mounts for tests: `node bin/knowledgefs.js mount …` as a CHILD
// process (the test process never hosts a FUSE loop, so it can run shell
// tools freely), plus async helpers to run `ls`/`cat`/`grep` against it.
//
//   const m = await startMount({ serverUrl: cp.url, token });
//   const r = await run('cat', [join(m.mountpoint, 'account/DUTY.md')]);
//   await m.stop();   // in afterAll/finally: SIGTERM, then fusermount -uz, always
//
// The mount point is `<fresh temp dir>/knowledge`, so `knowledge/…` paths
// resolve from `m.dir`. The token goes through a 0600 token file (or, with
// `tokenVia: 'env'`, $KNOWLEDGEFS_TOKEN), never argv. Each mount gets its
// own --socket under its temp dir.
//
// FUSE missing: `fuseSuite` skips the suite, except with CI=true where it
// fails instead (a CI machine without FUSE must not pass silently).

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describeFuseProblems, fuseProblems } from '../../src/daemon/fuse/fuse-check.js';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(REPO_ROOT, 'bin', 'knowledgefs.js');

/** Why FUSE can't be used here, or undefined when it can. */
export function fuseUnavailableReason(): string | undefined {
  const problems = fuseProblems();
  return problems.length === 0 ? undefined : describeFuseProblems(problems);
}

/**
 * `describe` for suites that need what this machine may lack (`reason` says
 * why it is missing, undefined when it is there): runs them with `present`
 * when it is there, skips them when it isn't, and fails with CI=true (a CI
 * machine must not pass by skipping).
 */
export function suiteNeeding(
  needs: string,
  reason: string | undefined,
  name: string,
  body: () => void,
  present: (name: string, body: () => void) => void = (n, b) => describe(n, b),
): void {
  if (reason === undefined) {
    present(name, body);
  } else if (process.env.CI === 'true') {
    describe(name, () => {
      it(`needs ${needs} (CI=true: without it this is a failure, not a skip)`, () => {
        throw new Error(reason);
      });
    });
  } else {
    describe.skip(`${name} (skipped: ${reason.replace(/\n/g, ' ')})`, body);
  }
}

/** `describe` for suites that need a real mount (see suiteNeeding). */
export function fuseSuite(name: string, body: () => void): void {
  suiteNeeding('FUSE', fuseUnavailableReason(), name, body);
}

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** True when the command was killed for running past `timeoutMs`. */
  readonly timedOut: boolean;
  /** Wall time, for generous "no hang" bounds only. */
  readonly ms: number;
}

export interface RunOptions {
  readonly cwd?: string;
  readonly timeoutMs?: number;
  readonly env?: Readonly<Record<string, string>>;
  readonly input?: string;
  /** Return stdout as latin1 bytes-in-a-string instead of utf8. */
  readonly binary?: boolean;
}

/** Runs a command asynchronously (never spawnSync while a mount is up). */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...args], {
      cwd: opts.cwd,
      env: { ...process.env, LC_ALL: 'C', ...opts.env },
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, opts.timeoutMs ?? 30_000);
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString(opts.binary ? 'latin1' : 'utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
        ms: Date.now() - started,
      });
    });
  });
}

/** `sh -c script`, for pipelines and redirections. */
export function sh(script: string, opts: RunOptions = {}): Promise<RunResult> {
  return run('sh', ['-c', script], opts);
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes; returns the last value. */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 15_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await check();
  while (!value && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, intervalMs));
    value = await check();
  }
  return value;
}

export function isMounted(mountpoint: string): boolean {
  try {
    return readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .some((line) => line.split(' ')[1] === mountpoint.replace(/ /g, '\\040'));
  } catch {
    return false;
  }
}

/** `fusermount -uz`, ignoring "not mounted". */
export async function forceUnmount(mountpoint: string): Promise<void> {
  if (!isMounted(mountpoint)) return;
  await run('fusermount', ['-uz', mountpoint], { timeoutMs: 10_000 }).catch(() => undefined);
}

export interface StartMountOptions {
  readonly serverUrl: string;
  readonly token: string;
  /** How the daemon gets the token: a 0600 --token-file (default) or $KNOWLEDGEFS_TOKEN. */
  readonly tokenVia?: 'file' | 'env';
  /** Extra `mount` flags, e.g. ['--grant-ttl', '0', '--sync-interval', '200ms']. */
  readonly args?: readonly string[];
  /** Default `<fresh temp dir>/knowledge`. */
  readonly mountpoint?: string;
  /** Default `<temp dir>/control.sock`. */
  readonly socketPath?: string;
  readonly env?: Readonly<Record<string, string>>;
  /** How long to wait for the "mounted" line (default 30 s). */
  readonly readyTimeoutMs?: number;
  /**
   * The CLI arguments that run the daemon, given `knowledgefs mount …`'s
   * (default: those as they are), e.g. to start it through `mount-helper`.
   */
  readonly wrap?: (mountArgs: readonly string[]) => string[];
  /** The daemon runs as this user: the token file and the socket's directory become its own. */
  readonly daemonUser?: { readonly uid: number; readonly gid: number };
  /** The CLI to run (default this checkout's bin/knowledgefs.js), e.g. a globally installed package's. */
  readonly bin?: string;
}

export interface MountHandle {
  readonly mountpoint: string;
  /** Directory holding the mount point (cwd for `knowledge/…` paths). */
  readonly dir: string;
  readonly socketPath: string;
  readonly child: ChildProcess;
  readonly pid: number | undefined;
  /** The "mounted …" line. */
  readonly readyLine: string;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when the daemon exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Signals the daemon without cleaning up (SIGKILL leaves a stale mount on purpose). */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (SIGKILL after 10 s), then `fusermount -uz` and the temp dir removed. Safe to call twice. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const READY = /^mounted (.+) \((\d+) files, (\d+) scopes\)$/m;

/** The FUSE binding a started mount runs on, from its startup line (auto is resolved there). */
export function bindingOf(m: Pick<MountHandle, 'stderr'>): 'native' | 'fuse-native' {
  const found = /fuse-binding (native|fuse-native)\b/.exec(m.stderr);
  if (found === null) throw new Error(`no fuse-binding in the mount's startup line:\n${m.stderr}`);
  return found[1] as 'native' | 'fuse-native';
}

/**
 * Flags added to every mount a suite starts (KNOWLEDGEFS_TEST_MOUNT_ARGS,
 * split on spaces): one suite run again under another mode, e.g.
 * `--kernel-opens on` (mount-kernel-opens-suites.test.ts).
 */
function suiteMountArgs(): string[] {
  return (process.env.KNOWLEDGEFS_TEST_MOUNT_ARGS ?? '').split(' ').filter((a) => a !== '');
}

export async function startMount(opts: StartMountOptions): Promise<MountHandle> {
  if (!existsSync(join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` before tests that spawn the CLI');
  }
  const dir = opts.mountpoint === undefined ? await mkdtemp(join(tmpdir(), 'kfs-mount-')) : dirname(opts.mountpoint);
  const ownDir = opts.mountpoint === undefined;
  const mountpoint = opts.mountpoint ?? join(dir, 'knowledge');
  const privateDir = await mkdtemp(join(tmpdir(), 'kfs-mountctl-'));
  const socketPath = opts.socketPath ?? join(privateDir, 'control.sock');
  const viaEnv = opts.tokenVia === 'env';
  const tokenFile = join(privateDir, 'token');
  if (!viaEnv) await writeFile(tokenFile, `${opts.token}\n`, { mode: 0o600 });
  if (opts.daemonUser !== undefined) {
    const { uid, gid } = opts.daemonUser;
    await chown(privateDir, uid, gid);
    if (!viaEnv) await chown(tokenFile, uid, gid);
  }

  const tokenArgs = viaEnv ? [] : ['--token-file', tokenFile];
  const args = ['mount', mountpoint, '--server', opts.serverUrl, ...tokenArgs, '--socket', socketPath, ...(opts.args ?? []), ...suiteMountArgs()];
  const env: NodeJS.ProcessEnv = { ...process.env, ...opts.env };
  if (viaEnv) env.KNOWLEDGEFS_TOKEN = opts.token;
  const child = spawn(process.execPath, [opts.bin ?? BIN, ...(opts.wrap?.(args) ?? args)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );

  let stopped: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  const kill = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  const stop = () => {
    stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const result = await exited;
      clearTimeout(timer);
      await forceUnmount(mountpoint);
      await rm(privateDir, { recursive: true, force: true }).catch(() => undefined);
      if (ownDir && !isMounted(mountpoint)) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      return result;
    })();
    return stopped;
  };

  let readyLine: string;
  try {
    readyLine = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`mount not ready after ${opts.readyTimeoutMs ?? 30_000} ms; stderr:\n${err}`)), opts.readyTimeoutMs ?? 30_000);
      const check = () => {
        const m = READY.exec(out);
        if (m !== null) {
          clearTimeout(timer);
          child.stdout.off('data', check);
          resolve(m[0]);
        }
      };
      child.stdout.on('data', check);
      void exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`mount exited (code ${code}, signal ${signal}) before ready; stderr:\n${err}`));
      });
    });
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    mountpoint,
    dir,
    socketPath,
    child,
    pid: child.pid,
    readyLine,
    get stdout() {
      return out;
    },
    get stderr() {
      return err;
    },
    exited,
    kill,
    stop,
  };
}
