// The filesystems our mount is compared with, each started as its own process:
//   C ceiling — bench/ceiling-c.c, libfuse 3 low-level serving the view from
//             memory (the physical limit of a mount whose opens reach it),
//             compiled here with gcc + pkg-config fuse3 once per run;
//   ceiling — bench/ceiling-fs.mjs, fuse-native serving the view from memory;
//   rclone  — Debian's rclone mounting the view over HTTP from
//             bench/static-server.mjs, `--vfs-cache-mode full --read-only`.
// (The limit, local disk, is the view directory itself.)
//
// `readyMs` is spawn → usable mount, the same clock as our mount's.

import { mkdirSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run, start, stop, trackMount, unmount, waitMounted } from './proc.mjs';

const BENCH = join(dirname(fileURLToPath(import.meta.url)), '..');
let seq = 0;

let ceilingCBinary = null;

/** Compiles bench/ceiling-c.c into workDir (once per run): a missing compiler or libfuse3-dev is an error naming it. */
async function buildCeilingC(workDir) {
  const out = join(workDir, 'ceiling-c');
  if (ceilingCBinary === out) return out;
  const r = await run(`gcc -O2 -Wall -o '${out}' '${join(BENCH, 'ceiling-c.c')}' $(pkg-config --cflags --libs fuse3)`);
  if (r.code !== 0) throw new Error(`cannot build bench/ceiling-c.c (needs gcc, pkg-config and libfuse3-dev): ${r.stderr.trim().slice(0, 500)}`);
  ceilingCBinary = out;
  return out;
}

/** The C libfuse 3 ceiling over viewDir. */
export async function startCeilingC(viewDir, workDir) {
  const bin = await buildCeilingC(workDir);
  const mnt = join(workDir, `ceilingc${++seq}`);
  mkdirSync(mnt, { recursive: true });
  trackMount(mnt);
  const t0 = process.hrtime.bigint();
  const handle = start(`ceilingc${seq}`, bin, [viewDir, mnt]);
  try {
    await handle.waitFor(/^mounted /, 120_000);
  } catch (err) {
    await stop(handle);
    await unmount(mnt);
    throw err;
  }
  return { handle, mnt, readyMs: Number(process.hrtime.bigint() - t0) / 1e6 };
}

/** policy 'best' = the ceiling; 'ours' = the same filesystem with our mount's kernel cache policy. */
export async function startCeiling(viewDir, workDir, policy = 'best') {
  const mnt = join(workDir, `ceiling${++seq}`);
  mkdirSync(mnt, { recursive: true });
  trackMount(mnt);
  const t0 = process.hrtime.bigint();
  const handle = start(`ceiling${seq}`, process.execPath, [join(BENCH, 'ceiling-fs.mjs'), viewDir, mnt, '--policy', policy]);
  try {
    await handle.waitFor(/^mounted /, 120_000);
  } catch (err) {
    await stop(handle);
    await unmount(mnt);
    throw err;
  }
  return { handle, mnt, readyMs: Number(process.hrtime.bigint() - t0) / 1e6 };
}

export async function startStaticServer(viewDir) {
  const handle = start('static-server', process.execPath, [join(BENCH, 'static-server.mjs'), viewDir]);
  const m = await handle.waitFor(/listening on (http:\/\/\S+)/, 30_000);
  return { handle, url: m[1] };
}

export async function startRclone(url, workDir) {
  const n = ++seq;
  const mnt = join(workDir, `rclone${n}`);
  const cacheDir = join(workDir, `rclone-cache${n}`);
  rmSync(cacheDir, { recursive: true, force: true });
  mkdirSync(mnt, { recursive: true });
  mkdirSync(cacheDir, { recursive: true });
  trackMount(mnt);
  const t0 = process.hrtime.bigint();
  const handle = start(`rclone${n}`, 'rclone', ['mount', ':http:', mnt, '--http-url', url,
    '--vfs-cache-mode', 'full', '--read-only', '--cache-dir', cacheDir,
    '--config', '/dev/null', '--log-level', 'ERROR']);
  try {
    const mounted = waitMounted(mnt, 60_000);
    const died = handle.exited.then(({ code }) => { throw new Error(`rclone exited (${code}): ${handle.tail()}`); });
    mounted.catch(() => {});
    died.catch(() => {});
    await Promise.race([mounted, died]);
  } catch (err) {
    await stop(handle);
    await unmount(mnt);
    throw err;
  }
  return { handle, mnt, cacheDir, readyMs: Number(process.hrtime.bigint() - t0) / 1e6 };
}

export async function stopPeer(peer) {
  await stop(peer.handle, 10_000);
  await unmount(peer.mnt);
  if (peer.cacheDir) rmSync(peer.cacheDir, { recursive: true, force: true });
}
