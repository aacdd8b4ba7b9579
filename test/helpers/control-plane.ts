// Control planes for tests, on 127.0.0.1 with a free port.
//
// startControlPlane: in-process (fast; parts can be wrapped via `deps`).
// spawnControlPlane: the real `node bin/knowledgefs.js serve` as a child
// process (needs `npm run build`); kill it with any signal and restart it on
// the same port with the same state file.
//
// Both default to a short scan interval (100 ms in-process, 200 ms spawned)
// so edits under the data dir show up quickly; pass your own to override.
//
// With $KNOWLEDGEFS_TEST_STATE_PG set (`npm run test:postgres` sets it for
// the existing server and mount suites it runs again), a control plane given
// no state of its own keeps its sessions in a fresh PostgreSQL database
// instead of a state file: the same tests, the other session state.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTROL_PLANE_METRICS } from '../../src/core/metrics.js';
import type { CreateSessionRequest, CreateSessionResponse } from '../../src/core/wire.js';
import { serveControlPlane, type ControlPlaneDeps, type ListeningControlPlane } from '../../src/server/control-plane.js';
import type { ListenAddress } from '../../src/core/text/listen-address.js';
import type { ControlPlaneOptions } from '../../src/server/options.js';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(REPO_ROOT, 'bin', 'knowledgefs.js');

export type SessionInput = CreateSessionRequest;

export async function createSessionAt(url: string, adminToken: string, input: SessionInput): Promise<CreateSessionResponse> {
  const res = await fetch(`${url}/v1/admin/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`creating session ${JSON.stringify(input)}: HTTP ${res.status} ${text}`);
  return JSON.parse(text) as CreateSessionResponse;
}

export interface TestControlPlane {
  readonly url: string;
  readonly adminToken: string;
  /** The running control plane (store, registry, handler...). */
  readonly cp: ListeningControlPlane;
  /** Log lines so far. */
  readonly logs: string[];
  createSession(input: SessionInput): Promise<{ sessionId: string; token: string }>;
  /** Rescans the data dir now instead of waiting for the interval. */
  rescan(): Promise<void>;
  close(): Promise<void>;
}

export type StartOptions = Partial<ControlPlaneOptions> & {
  readonly deps?: ControlPlaneDeps;
  /** Also serve token-less metrics here (port 0 picks one). */
  readonly metricsListen?: ListenAddress;
  /** Also print log lines to stderr. */
  readonly verbose?: boolean;
};

export const TEST_STATE_PG_ENV = 'KNOWLEDGEFS_TEST_STATE_PG';

/** A fresh database on the cluster named by $KNOWLEDGEFS_TEST_STATE_PG, or undefined when it is not set. */
async function freshStateDatabase(): Promise<string | undefined> {
  const base = process.env[TEST_STATE_PG_ENV];
  if (base === undefined || base === '') return undefined;
  const name = `kfs_${randomBytes(8).toString('hex')}`;
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function startControlPlane(options: StartOptions): Promise<TestControlPlane> {
  const { deps, verbose, ...rest } = options;
  const ownState = rest.stateUrl !== undefined || rest.stateFile !== undefined || deps?.stateStore !== undefined;
  const stateUrl = ownState ? undefined : await freshStateDatabase();
  if (stateUrl !== undefined) (rest as { stateUrl?: string }).stateUrl = stateUrl;
  const logs: string[] = [];
  const adminToken = rest.adminToken ?? `kfsadmin_test_${randomBytes(16).toString('hex')}`;
  const cp = await serveControlPlane(
    {
      scanIntervalMs: 100,
      ...rest,
      adminToken,
      host: '127.0.0.1',
      port: 0,
      log: (line) => {
        logs.push(line);
        if (verbose) process.stderr.write(`[control plane] ${line}\n`);
      },
    },
    deps,
  );
  return {
    url: cp.url,
    adminToken,
    cp,
    logs,
    createSession: (input) => createSessionAt(cp.url, adminToken, input),
    rescan: () => cp.rescan(),
    close: () => cp.close(),
  };
}

/** Waits until `n` plan long-polls wait at `cp` (its open long-polls gauge), so what a test does next lands while they wait. */
export async function longPollsWaiting(cp: TestControlPlane, n: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const open = (await cp.cp.metrics.samples(CONTROL_PLANE_METRICS.planLongPolls))[0]?.value ?? 0;
    if (open >= n) return;
    if (Date.now() > deadline) throw new Error(`${open} plan long-polls waiting, not ${n}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export interface SpawnOptions {
  /** The data directory; absent when `args` name a `--store`. */
  readonly dataDir?: string;
  /** Extra `serve` arguments (e.g. ['--membership-url', url]). */
  readonly args?: readonly string[];
  /** Port to listen on; default a free one (kept across restarts). */
  readonly port?: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Admin token; default a fresh one (replicas of one deployment share theirs). */
  readonly adminToken?: string;
  /** The CLI to run; default this repository's bin/knowledgefs.js (another release's, for upgrade tests). */
  readonly bin?: string;
}

export interface SpawnedControlPlane {
  readonly url: string;
  readonly port: number;
  readonly adminToken: string;
  /** Output of the current and all previous runs. */
  readonly stdout: string;
  readonly stderr: string;
  readonly pid: number | undefined;
  createSession(input: SessionInput): Promise<{ sessionId: string; token: string }>;
  /** Sends `signal` (default SIGTERM) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Stops the process if it runs (SIGTERM) and starts it again on the same port with the same state. */
  restart(): Promise<void>;
}

const READY = /listening on (http:\/\/\S+)/;

export async function spawnControlPlane(options: SpawnOptions): Promise<SpawnedControlPlane> {
  const bin = options.bin ?? BIN;
  if (!existsSync(join(dirname(bin), '..', 'dist', 'cli', 'main.js'))) {
    throw new Error(`${bin === BIN ? 'dist/' : join(dirname(bin), '..', 'dist')} is missing: run \`npm run build\` before tests that spawn the CLI`);
  }
  const adminToken = options.adminToken ?? `kfsadmin_test_${randomBytes(16).toString('hex')}`;
  const args = [...(options.args ?? [])];
  if (!args.includes('--scan-interval')) args.push('--scan-interval', '200ms');
  if (!args.includes('--state')) {
    const stateUrl = await freshStateDatabase();
    if (stateUrl !== undefined) args.push('--state', stateUrl);
  }
  let port = options.port ?? 0;
  let url = '';
  let out = '';
  let err = '';
  let child: ChildProcess | null = null;
  let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> = Promise.resolve({ code: null, signal: null });

  const start = async (): Promise<void> => {
    const runOut = { text: '' };
    const source = options.dataDir !== undefined ? ['--data', options.dataDir] : [];
    const proc = spawn(process.execPath, [bin, 'serve', ...source, '--listen', `127.0.0.1:${port}`, ...args], {
      env: { ...process.env, ...options.env, KNOWLEDGEFS_ADMIN_TOKEN: adminToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    proc.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      runOut.text += s;
    });
    proc.stderr.setEncoding('utf8').on('data', (s: string) => {
      err += s;
      // With `--audit-log -` stdout carries only audit lines and "listening on" comes on stderr.
      if (args.includes('-')) runOut.text += s;
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`control plane not ready after 30 s; stderr:\n${err}`)), 30_000);
      const check = () => {
        const m = READY.exec(runOut.text);
        if (m?.[1] !== undefined) {
          clearTimeout(timer);
          proc.stdout.off('data', check);
          proc.stderr.off('data', check);
          url = m[1];
          port = Number(new URL(url).port);
          resolve();
        }
      };
      proc.stdout.on('data', check);
      proc.stderr.on('data', check);
      void exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`control plane exited (code ${code}, signal ${signal}) before ready; stderr:\n${err}`));
      });
    });
  };

  const kill = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const proc = child as ChildProcess | null;
    if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return exited;
    proc.kill(signal);
    return exited;
  };

  await start();
  return {
    get url() {
      return url;
    },
    get port() {
      return port;
    },
    adminToken,
    get stdout() {
      return out;
    },
    get stderr() {
      return err;
    },
    get pid() {
      return (child as ChildProcess | null)?.pid;
    },
    createSession: (input) => createSessionAt(url, adminToken, input),
    kill,
    async restart() {
      await kill('SIGTERM');
      await start();
    },
  };
}

/**
 * Sends one raw HTTP/1.1 request (path sent byte for byte, no URL
 * normalisation: `..` stays `..`) and returns the raw response bytes plus the
 * parsed status and body. For path-attack tests and byte-identity checks.
 */
export async function rawRequest(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Buffer,
): Promise<{ raw: Buffer; status: number; head: string; body: Buffer }> {
  const { createConnection } = await import('node:net');
  const u = new URL(url);
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
  const lines = [`${method} ${path} HTTP/1.1`, `host: ${u.host}`, 'connection: close'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined) lines.push(`content-length: ${payload.length}`);
  const request = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const socket = createConnection({ host: u.hostname, port: Number(u.port) });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks)));
    socket.on('error', reject);
    socket.setTimeout(30_000, () => socket.destroy(new Error('raw request timed out')));
    socket.write(request);
  });
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, split).toString('latin1');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  return { raw, status, head, body: raw.subarray(split + 4) };
}
