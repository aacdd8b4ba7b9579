// A real, throwaway PostgreSQL cluster for tests: initdb into a temp dir,
// pg_ctl start on 127.0.0.1 with a free port, removed by `destroy()`.
//
// Debian keeps initdb/pg_ctl in /usr/lib/postgresql/<major>/bin, off PATH.
// initdb refuses to run as root, so under root the cluster belongs to the
// `postgres` user (runuser) and the temp dir is handed to it. `durable:
// true` keeps fsync and synchronous_commit on, for crash tests that must not
// lose acknowledged writes; otherwise both are off (faster, and nothing is
// lost unless the machine itself crashes).

import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);
const ROOT = '/usr/lib/postgresql';

export function postgresBinDir(): string {
  const majors = existsSync(ROOT) ? readdirSync(ROOT).filter((d) => existsSync(join(ROOT, d, 'bin', 'initdb'))) : [];
  const newest = majors.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`no PostgreSQL server under ${ROOT} (apt-get install postgresql)`);
  return join(ROOT, newest, 'bin');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface PgCluster {
  readonly port: number;
  readonly dir: string;
  /** postgres://postgres@127.0.0.1:PORT/DATABASE (default database `postgres`). */
  url(database?: string): string;
  /** Creates a fresh database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Runs SQL on a database (default `postgres`). */
  sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[], database?: string): Promise<R[]>;
  /** `immediate` is a crash: no checkpoint, recovery from the WAL at the next start. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  readonly running: boolean;
  /** The server log so far. */
  log(): Promise<string>;
  /** Stops the server (if running) and removes the directory. */
  destroy(): Promise<void>;
}

async function asOwner(uid: number | null, command: string, args: string[]): Promise<void> {
  const [file, argv] = uid === null ? [command, args] : ['runuser', ['-u', 'postgres', '--', command, ...args]];
  try {
    await run(file, argv, { timeout: 60_000 });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

export async function startPostgres(opts: { durable?: boolean } = {}): Promise<PgCluster> {
  const bin = postgresBinDir();
  const isRoot = process.getuid?.() === 0;
  let ownerUid: number | null = null;
  // Short path: the unix socket lives in it and socket paths are limited to ~107 bytes.
  const dir = await mkdtemp('/tmp/kfspg-');
  if (isRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    ownerUid = Number(stdout.trim());
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, ownerUid, Number(gid.trim()));
  }
  const data = join(dir, 'data');
  await asOwner(ownerUid, join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
  const port = await freePort();
  const durability = opts.durable ? ['-c fsync=on', '-c synchronous_commit=on'] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'];
  const serverOptions = ['-c listen_addresses=127.0.0.1', `-p ${port}`, `-k ${dir}`, '-c max_connections=200', ...durability].join(' ');
  let running = false;

  const cluster: PgCluster = {
    port,
    dir,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async createDatabase(name) {
      await cluster.sql(`CREATE DATABASE ${name}`);
      return cluster.url(name);
    },
    async sql(text, values, database) {
      const client = new pg.Client({ connectionString: cluster.url(database) });
      await client.connect();
      try {
        return (await client.query(text, values)).rows;
      } finally {
        await client.end();
      }
    },
    async stop(mode = 'fast') {
      if (!running) return;
      await asOwner(ownerUid, join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', '-t', '30', 'stop']);
      running = false;
    },
    async start() {
      if (running) return;
      await asOwner(ownerUid, join(bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '30', '-o', serverOptions, 'start']);
      running = true;
    },
    get running() {
      return running;
    },
    log: () => readFile(join(dir, 'server.log'), 'utf8').catch(() => ''),
    async destroy() {
      await cluster.stop('immediate').catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await cluster.start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return cluster;
}
