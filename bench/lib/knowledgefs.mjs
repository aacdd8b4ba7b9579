// Drives knowledgefs the way an operator would: the built CLI for `serve` and
// `mount` (each its own process), the admin HTTP API for sessions, the
// daemon's local control socket for status and the read tool.
//
// Mounts run with the defaults (content cached in memory only), so every
// mount starts cold. `cacheDir: true` adds a fresh --cache-dir (the disk
// spill), so a "cold" mount never finds content spilled by an earlier one.

import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { start, stop, trackMount, unmount } from './proc.mjs';

export const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(REPO, 'bin', 'knowledgefs.js');

const cli = (args) => [BIN, ...args];

/** Starts `knowledgefs serve` on 127.0.0.1:0; resolves {handle, url, adminToken, startMs}. */
export async function startServer(dataDir, workDir, { timeoutMs = 180_000 } = {}) {
  mkdirSync(workDir, { recursive: true });
  const adminToken = randomBytes(24).toString('hex');
  const adminFile = join(workDir, 'admin-token');
  writeFileSync(adminFile, adminToken, { mode: 0o600 });
  const args = cli(['serve', '--data', dataDir, '--listen', '127.0.0.1:0', '--admin-token-file', adminFile,
    '--state', join(workDir, 'state.json'), '--audit-log', join(workDir, 'audit.log')]);
  const t0 = process.hrtime.bigint();
  const handle = start('serve', process.execPath, args);
  try {
    const m = await handle.waitFor(/listening on (http:\/\/[^\s]+)/, timeoutMs);
    return { handle, url: m[1].replace(/\/$/, ''), adminToken, startMs: Number(process.hrtime.bigint() - t0) / 1e6 };
  } catch (err) {
    await stop(handle);
    throw err;
  }
}

export async function createSession(server, body) {
  const res = await fetch(`${server.url}/v1/admin/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 201 && res.status !== 200) throw new Error(`session create → ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

export function writeToken(dir, name, token) {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.token`);
  writeFileSync(file, token, { mode: 0o600 });
  return file;
}

let mountSeq = 0;

/**
 * Starts `knowledgefs mount`. The mount point is `<base>/knowledge` so the
 * read tool's `knowledge/…` paths resolve from `<base>`. Resolves
 * {handle, mnt, base, socket, readyMs, files, scopes}.
 */
export async function startMount(server, tokenFile, workDir, opts = {}) {
  const n = ++mountSeq;
  const base = join(workDir, `m${n}`);
  const mnt = join(base, 'knowledge');
  const cacheDir = opts.cacheDir === true ? join(workDir, `cache${n}`) : undefined;
  mkdirSync(mnt, { recursive: true });
  if (cacheDir !== undefined) {
    rmSync(cacheDir, { recursive: true, force: true });
    mkdirSync(cacheDir, { recursive: true });
  }
  const socket = join(workDir, `s${n}.sock`);
  const args = ['mount', mnt, '--server', server.url, '--token-file', tokenFile,
    '--prefetch-threshold', opts.threshold ?? '1GiB',
    '--prefetch-content', opts.prefetch ?? 'on',
    '--socket', socket];
  if (cacheDir !== undefined) args.push('--cache-dir', cacheDir);
  if (opts.grantTtl !== undefined) args.push('--grant-ttl', opts.grantTtl);
  if (opts.binding !== undefined) args.push('--fuse-binding', opts.binding);
  for (const extra of opts.extraArgs ?? []) args.push(extra);
  trackMount(mnt);
  const t0 = process.hrtime.bigint();
  const handle = start(`mount${n}`, process.execPath, cli(args));
  try {
    const m = await handle.waitFor(/^mounted .* \((\d+) files?, (\d+) scopes?\)/, opts.timeoutMs ?? 180_000);
    const readyMs = Number(process.hrtime.bigint() - t0) / 1e6;
    // The daemon's own account of its start (after Node and the modules loaded), logged right after `mounted`.
    const re = /ready in (\d+) ms \(session \+ plan (\d+) ms, tree (\d+) ms, mount (\d+) ms\)/;
    const b = handle.seen(re) ?? (await handle.waitFor(re, 2000).catch(() => null));
    const breakdown = b ? { inProcessMs: Number(b[1]), sessionPlanMs: Number(b[2]), treeMs: Number(b[3]), mountMs: Number(b[4]) } : null;
    return { handle, mnt, base, socket, cacheDir, readyMs, breakdown, files: Number(m[1]), scopes: Number(m[2]) };
  } catch (err) {
    await stop(handle);
    await unmount(mnt);
    throw err;
  }
}

export async function stopMount(mount) {
  await stop(mount.handle, 10_000);
  await unmount(mount.mnt);
  if (mount.cacheDir !== undefined) rmSync(mount.cacheDir, { recursive: true, force: true });
}

/** VmRSS and VmHWM of a process, in MiB. */
export function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/** CPU time (user + system) a process has used so far, in ms. */
export function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, 100 ticks/s
}

/** CPU a process burns per second while nothing is asked of it (background scans, timers). */
export async function idleCpuMsPerS(pid, ms = 3000) {
  const c0 = cpuMs(pid);
  await new Promise((r) => setTimeout(r, ms));
  return ((cpuMs(pid) - c0) / ms) * 1000;
}

/** An HTTP client on the daemon's control socket (one keep-alive connection). */
export function socketClient(socket) {
  return new Client('http://localhost', { socketPath: socket, pipelining: 1 });
}

export async function socketJson(client, method, path, body) {
  const res = await client.request({
    method, path,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  let json;
  try { json = JSON.parse(text); } catch { json = { ok: false, error: { code: 'bad_json', message: text.slice(0, 200) } }; }
  return { status: res.statusCode, json };
}

/** Waits until the daemon's content prefetch is done (or `ms` passes). */
export async function waitPrefetch(socket, ms) {
  const client = socketClient(socket);
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      const { json } = await socketJson(client, 'GET', '/status');
      const p = json?.prefetch;
      if (p && p.done >= p.total) return p;
      if (Date.now() > deadline) return p ?? null;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await client.close();
  }
}
