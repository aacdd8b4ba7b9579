// Child processes and mount points for the bench, with one cleanup path.
//
// Every process the bench starts and every mount point it uses is registered
// here, so a normal end, a thrown error, Ctrl-C or SIGTERM all stop the
// children (SIGTERM, then SIGKILL after a grace period, each by its own pid)
// and lazily unmount every mount point (`fusermount -uz`). The orchestrator
// never serves FUSE itself, so the synchronous last-resort cleanup in the
// 'exit' handler cannot deadlock on a mount.
//
// Commands are always timed in child processes (`sh -c`), asynchronously:
// wall time from spawn to exit, which includes a constant ~2 ms of spawn.

import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';

const children = new Set();
const mounts = new Set();
let verbose = false;

export function setVerbose(v) {
  verbose = v;
}

export function log(msg) {
  process.stderr.write(`bench: ${msg}\n`);
}

/**
 * Starts a long-running child. Returns a handle with `waitFor(regex, ms)`
 * resolving the first stdout/stderr line matching, `exited` (a promise of
 * {code, signal}) and `tail()` (last stderr/stdout lines, for errors).
 */
export function start(name, cmd, args, options = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  const lines = [];
  const waiters = [];
  const handle = { name, child, pid: child.pid, alive: true };
  const onLine = (stream) => (line) => {
    lines.push(`${stream}: ${line}`);
    if (lines.length > 40) lines.shift();
    if (verbose) process.stderr.write(`  [${name}] ${line}\n`);
    for (const w of [...waiters]) {
      const m = w.re.exec(line);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  createInterface({ input: child.stdout }).on('line', onLine('out'));
  createInterface({ input: child.stderr }).on('line', onLine('err'));
  handle.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      handle.alive = false;
      children.delete(handle);
      for (const w of waiters.splice(0)) w.reject(new Error(`${name} exited (${code ?? signal}) before "${w.re.source}": ${handle.tail()}`));
      resolve({ code, signal });
    });
    child.on('error', (err) => {
      handle.alive = false;
      children.delete(handle);
      for (const w of waiters.splice(0)) w.reject(new Error(`${name} failed to start: ${err.message}`));
      resolve({ code: -1, signal: null });
    });
  });
  handle.tail = () => lines.slice(-8).join(' | ');
  /** The last line already printed that matches `re` (its match), or null. */
  handle.seen = (re) => {
    for (let i = lines.length - 1; i >= 0; i--) {
      const m = re.exec(lines[i].replace(/^(out|err): /, ''));
      if (m) return m;
    }
    return null;
  };
  handle.waitFor = (re, ms) => new Promise((resolve, reject) => {
    if (!handle.alive) return reject(new Error(`${name} is not running: ${handle.tail()}`));
    const w = { re, resolve: (m) => { clearTimeout(timer); resolve(m); }, reject: (e) => { clearTimeout(timer); reject(e); } };
    const timer = setTimeout(() => {
      waiters.splice(waiters.indexOf(w), 1);
      reject(new Error(`${name}: no "${re.source}" within ${ms} ms: ${handle.tail()}`));
    }, ms);
    waiters.push(w);
  });
  children.add(handle);
  return handle;
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL. Never by name: by this pid only. */
export async function stop(handle, graceMs = 5000) {
  if (!handle || !handle.alive) return;
  try { process.kill(handle.pid, 'SIGTERM'); } catch { /* already gone */ }
  const timer = setTimeout(() => {
    try { process.kill(handle.pid, 'SIGKILL'); } catch { /* already gone */ }
  }, graceMs);
  await handle.exited;
  clearTimeout(timer);
}

export function trackMount(path) {
  mounts.add(path);
}

export async function unmount(path) {
  await run(`fusermount -uz '${path}' 2>/dev/null || true`);
}

/** Runs `sh -c cmd`; resolves {ms, code, stdout, stderr, timedOut}. */
export function run(cmd, { timeoutMs = 600_000, cwd, env } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const child = spawn('sh', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'], cwd, env });
    const handle = { name: `sh ${cmd.slice(0, 40)}`, child, pid: child.pid, alive: true };
    children.add(handle);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { if (stdout.length < 1e6) stdout += d; });
    child.stderr.on('data', (d) => { if (stderr.length < 1e5) stderr += d; });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
    }, timeoutMs);
    child.on('close', (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      clearTimeout(timer);
      handle.alive = false;
      children.delete(handle);
      resolve({ ms, code, stdout, stderr, timedOut });
    });
  });
}

/** Polls /proc/self/mountinfo until `path` is a mount point. */
export async function waitMounted(path, ms) {
  const deadline = Date.now() + ms;
  const { readFile } = await import('node:fs/promises');
  for (;;) {
    const info = await readFile('/proc/self/mountinfo', 'utf8');
    if (info.split('\n').some((l) => l.split(' ')[4] === path)) return;
    if (Date.now() > deadline) throw new Error(`${path} not mounted within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const finalizers = [];

/** Runs after every child is stopped and every mount detached (e.g. removing the run's scratch directory). */
export function onCleanup(fn) {
  finalizers.push(fn);
}

export async function cleanup() {
  await Promise.all([...children].map((h) => stop(h, 3000)));
  for (const m of mounts) await unmount(m);
  for (const f of finalizers.splice(0)) {
    try { f(); } catch { /* best effort */ }
  }
}

function lastResort() {
  for (const h of children) {
    try { process.kill(h.pid, 'SIGKILL'); } catch { /* gone */ }
  }
  for (const m of mounts) spawnSync('fusermount', ['-uz', m], { stdio: 'ignore' });
}

let installed = false;
export function installCleanupHandlers() {
  if (installed) return;
  installed = true;
  let stopping = false;
  const onSignal = (sig) => {
    if (stopping) return;
    stopping = true;
    log(`${sig}: stopping children and unmounting…`);
    cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('exit', lastResort);
}
