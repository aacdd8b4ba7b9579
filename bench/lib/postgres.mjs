// A throwaway PostgreSQL cluster for the scale-out bench: initdb in a temp
// dir and pg_ctl on 127.0.0.1 with a free port (as the `postgres` user when
// run as root: initdb refuses root). Durable settings as shipped (fsync and
// synchronous_commit on): the numbers include the commits a real deployment
// pays. Stopped and removed by the bench's cleanup.

import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { onCleanup } from './proc.mjs';

function binDir() {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((d) => existsSync(join(root, d, 'bin', 'initdb'))) : [];
  const newest = majors.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`no PostgreSQL under ${root} (apt-get install postgresql)`);
  return join(root, newest, 'bin');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function startPostgres() {
  const bin = binDir();
  const dir = mkdtempSync('/tmp/kfsbench-pg-');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
  const run = (cmd, args) => execFileSync(asRoot ? 'runuser' : cmd, asRoot ? ['-u', 'postgres', '--', cmd, ...args] : args, { stdio: 'pipe' });
  const data = join(dir, 'data');
  run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
  const port = await freePort();
  run(join(bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '30', '-o', `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c max_connections=200`, 'start']);
  const stop = () => {
    try {
      run(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true });
  };
  onCleanup(stop);
  const postmasterPid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { port, url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`, postmasterPid, stop };
}

/** CPU (user + system, ms) used so far by the postmaster and every backend it started. */
export function clusterCpuMs(postmasterPid) {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ');
      const pid = Number(entry);
      if (pid !== postmasterPid && Number(fields[1]) !== postmasterPid) continue;
      total += (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}
