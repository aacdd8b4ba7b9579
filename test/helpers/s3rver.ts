// A real S3-protocol server for tests: s3rver in a child process, on
// 127.0.0.1 with a free port, storing into a temp dir. `stop()` and
// `start()` again keep the port and the objects (the bucket goes away and
// comes back); `pause()`/`resume()` (SIGSTOP/SIGCONT) make it hang.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 's3rver-child.cjs');

/** s3rver's fixed credentials. */
export const S3RVER_ENV = {
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  AWS_REGION: 'us-east-1',
} as const;

export interface TestS3 {
  readonly endpoint: string;
  readonly port: number;
  readonly dir: string;
  readonly bucket: string;
  /** Environment for a child `knowledgefs` (credentials, region). */
  readonly env: Record<string, string>;
  /** Starts it again on the same port with the same objects. */
  start(): Promise<void>;
  /** Ends the process (the store becomes unreachable). */
  stop(): Promise<void>;
  pause(): void;
  resume(): void;
  /** Stops it and removes its files. */
  close(): Promise<void>;
}

/**
 * Ends `child` with SIGKILL if this process dies first, even killed outright
 * with s3rver paused (SIGSTOP): a test runner that kills its workers (StrykerJS
 * on a timed-out mutant) otherwise leaves a stopped s3rver behind. Ends when
 * either process is gone.
 */
function killWithParent(child: ChildProcess): void {
  const script = `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${child.pid} 2>/dev/null; do sleep 0.5; done; kill -KILL ${child.pid} 2>/dev/null`;
  spawn('sh', ['-c', script], { stdio: 'ignore' }).unref();
}

function launch(dir: string, port: number, bucket: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--openssl-legacy-provider', CHILD, dir, String(port), bucket], { stdio: ['ignore', 'pipe', 'pipe'] });
  killWithParent(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code} before listening: ${err}`)));
  });
}

export async function startS3(bucket = 'knowledge'): Promise<TestS3> {
  const dir = await mkdtemp(join(tmpdir(), 'kfs-s3-'));
  let { child, port } = await launch(dir, 0, bucket);
  let running = true;
  const stop = async () => {
    if (!running) return;
    running = false;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    dir,
    bucket,
    env: { ...S3RVER_ENV, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}` },
    async start() {
      if (running) return;
      ({ child } = await launch(dir, port, bucket));
      running = true;
    },
    stop,
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async close() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
