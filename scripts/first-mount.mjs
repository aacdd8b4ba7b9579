// How long the first mount takes under a given Node binary: `knowledgefs
// serve` on examples/knowledge-base (127.0.0.1, free port), a personal
// session for alice, then `knowledgefs mount`, timed from its spawn to its
// `mounted` line (Node start, module loading, the plan, the FUSE mount).
// Unmounts (the daemon's SIGTERM path, `fusermount -uz` as a fallback) and
// stops the control plane even on failure. Needs `npm run build`.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './node-binary.mjs';

const BIN = join(REPO_ROOT, 'bin', 'knowledgefs.js');
const EXAMPLES = join(REPO_ROOT, 'examples', 'knowledge-base');
const WAIT_MS = 30_000;

function start(node, args, env) {
  const proc = spawn(node, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const child = { proc, out: '', err: '', exited: new Promise((r) => proc.on('close', r)) };
  proc.stdout.setEncoding('utf8').on('data', (d) => { child.out += d; });
  proc.stderr.setEncoding('utf8').on('data', (d) => { child.err += d; });
  return child;
}

function waitForLine(child, re, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${what}: no ${re} within ${WAIT_MS} ms\n${child.err}`)), WAIT_MS);
    const check = () => { const m = re.exec(child.out); if (m) done(null, m); };
    const onExit = (code) => done(new Error(`${what} exited with ${code} before ${re}\n${child.err}`));
    function done(err, m) {
      clearTimeout(timer);
      child.proc.stdout.off('data', check);
      child.proc.off('close', onExit);
      if (err) reject(err); else resolve(m);
    }
    child.proc.stdout.on('data', check);
    child.proc.on('close', onExit);
    check();
  });
}

async function stop(child) {
  if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGTERM');
  await child.exited;
}

/** Milliseconds from spawning `knowledgefs mount` to its `mounted` line, under `node` with `env`. */
export async function timeFirstMount(node, env) {
  const tmp = mkdtempSync(join(tmpdir(), 'kfs-first-mount-'));
  const mountpoint = join(tmp, 'knowledge');
  const adminToken = `kfsadmin_${randomBytes(16).toString('hex')}`;
  const children = [];
  try {
    const serve = start(node, ['serve', '--data', EXAMPLES, '--listen', '127.0.0.1:0', '--state', join(tmp, 'state.json'),
      '--audit-log', join(tmp, 'audit.log')], { ...env, KNOWLEDGEFS_ADMIN_TOKEN: adminToken });
    children.push(serve);
    const [, url] = await waitForLine(serve, /listening on (http:\/\/\S+)/, 'knowledgefs serve');
    const created = spawnSync(node, [BIN, 'session', 'create', '--server', url, '--kind', 'personal', '--creator', 'alice', '--team', 'payments', '--json'],
      { env: { ...env, KNOWLEDGEFS_ADMIN_TOKEN: adminToken }, encoding: 'utf8' });
    if (created.status !== 0) throw new Error(`session create failed: ${created.stderr}`);
    writeFileSync(join(tmp, 'token'), JSON.parse(created.stdout).token, { mode: 0o600 });
    const began = performance.now();
    const mount = start(node, ['mount', mountpoint, '--server', url, '--token-file', join(tmp, 'token'), '--socket', join(tmp, 'run', 'control.sock')], env);
    children.push(mount);
    await waitForLine(mount, /^mounted /m, 'knowledgefs mount');
    return performance.now() - began;
  } finally {
    for (const child of children.reverse()) await stop(child);
    spawnSync('fusermount', ['-uz', mountpoint], { stdio: 'ignore' });
    rmSync(tmp, { recursive: true, force: true });
  }
}
