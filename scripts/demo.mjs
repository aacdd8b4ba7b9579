#!/usr/bin/env node
// `npm run demo`: knowledgefs end to end on this machine, in about a minute.
//
// Copies examples/knowledge-base to a temp data dir (edits never touch the
// repo), starts `knowledgefs serve` on 127.0.0.1 (free port), creates a
// personal session for alice (member of payments and search) bound to
// payments, mounts knowledge/ at ./.kfs-demo/knowledge with a prefetch
// threshold small enough that search is left out, and walks through the
// three surfaces with the exact commands echoed. Then it leaves the mount up
// for exploring until Ctrl-C (or exits at once with --no-wait).
//
// Clean-up always runs — after the walkthrough, on Ctrl-C/SIGTERM, or when a
// step throws: unmount (the daemon's own SIGTERM path, then `fusermount -uz`
// as a fallback), stop the control plane, remove temp dirs. Both children
// run in their own process group so a Ctrl-C reaches the demo only and the
// shutdown happens in order (mount first, then the control plane).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, rmdirSync, statSync, writeFileSync, appendFileSync, readdirSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'knowledgefs.js');
const EXAMPLES = join(ROOT, 'examples', 'knowledge-base');

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  process.stdout.write(`usage: node scripts/demo.mjs [--no-wait] [--workdir DIR]

  --no-wait       exit after the walkthrough (cleaning up) instead of leaving the mount up
  --workdir DIR   where knowledge/ is mounted (default ./.kfs-demo)
`);
  process.exit(0);
}
const noWait = argv.includes('--no-wait');
const workdirIdx = argv.indexOf('--workdir');
const WORK = workdirIdx >= 0 && argv[workdirIdx + 1] ? resolve(argv[workdirIdx + 1]) : join(ROOT, '.kfs-demo');
const MOUNT = join(WORK, 'knowledge');

const tty = process.stdout.isTTY === true;
const paint = (code, s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const out = (s = '') => process.stdout.write(`${s}\n`);
const heading = (n, title) => out(`\n${paint('1;36', `== ${n}. ${title} ==`)}`);
const explain = (s) => out(paint('2', s));
const fail = (msg) => {
  process.stderr.write(`demo: ${msg}\n`);
  process.exit(1);
};

// ---- preflight: say what is missing before starting anything ----
if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) fail('dist/ is missing: run `npm run demo` (it builds first) or `npm run build`.');
if (!existsSync('/dev/fuse')) {
  fail(
    '/dev/fuse is missing, so nothing can be mounted here.\n' +
      '  on a host:        modprobe fuse (as root)\n' +
      '  in a container:   docker run --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor:unconfined …\n' +
      '  then check with:  node bin/knowledgefs.js doctor',
  );
}
const isRoot = process.getuid?.() === 0;
if (!isRoot) {
  try {
    await access('/dev/fuse', constants.R_OK | constants.W_OK);
  } catch {
    fail(
      `not running as root, and /dev/fuse is not read-write for uid ${process.getuid?.()}.\n` +
        '  run the demo as root (sudo npm run demo), or make /dev/fuse mode 0666 and fusermount setuid root (the Debian defaults).\n' +
        '  node bin/knowledgefs.js doctor prints what else is missing.',
    );
  }
}

// ---- state for clean-up ----
const tmp = mkdtempSync(join(tmpdir(), 'kfs-demo-'));
const DATA = join(tmp, 'data');
const SOCKET = join(tmp, 'control.sock');
const SHIMS = join(tmp, 'bin');
/** @type {{name: string, proc: import('node:child_process').ChildProcess, exited: Promise<void>}[]} */
const children = [];
let unexpected = 0;
let cleaning = null;
/** Set once our daemon said `mounted`: only then is a leftover mount ours to remove. */
let mountedByUs = false;

function startChild(name, args, env) {
  const proc = spawn(process.execPath, [BIN, ...args], {
    cwd: WORK,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise((resolve) => proc.once('exit', () => resolve()));
  const entry = { name, proc, exited, stdout: '', stderr: '' };
  proc.stdout.setEncoding('utf8').on('data', (d) => { entry.stdout += d; });
  proc.stderr.setEncoding('utf8').on('data', (d) => { entry.stderr += d; });
  children.push(entry);
  return entry;
}

function waitForLine(entry, pattern, what, timeoutMs = 60_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} not ready after ${timeoutMs / 1000} s:\n${entry.stderr}`)), timeoutMs);
    const check = () => {
      const m = pattern.exec(entry.stdout);
      if (m) {
        clearTimeout(timer);
        entry.proc.stdout.off('data', check);
        resolve(m);
      }
    };
    entry.proc.stdout.on('data', check);
    entry.proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (code ${code}) before it was ready:\n${entry.stderr.trim()}`));
    });
    check();
  });
}

async function stopChild(entry, timeoutMs = 10_000) {
  const { proc } = entry;
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill('SIGTERM');
  const timer = new Promise((resolve) => setTimeout(() => resolve('timeout'), timeoutMs));
  if ((await Promise.race([entry.exited, timer])) === 'timeout') {
    process.stderr.write(`demo: ${entry.name} did not stop within ${timeoutMs / 1000} s; killing it\n`);
    proc.kill('SIGKILL');
    await entry.exited;
  }
}

/** Runs a shell command in WORK; resolves with its output and exit status. */
function sh(command, extraEnv = {}) {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], {
      cwd: WORK,
      env: { ...process.env, PATH: `${SHIMS}:${process.env.PATH ?? ''}`, KNOWLEDGEFS_SOCKET: SOCKET, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Echoes `$ command`, runs it, prints its output; checks an expectation. */
async function step(command, expect) {
  out(paint('1', `$ ${command}`));
  const r = await sh(command);
  if (r.stdout) process.stdout.write(r.stdout.endsWith('\n') ? r.stdout : `${r.stdout}\n`);
  if (r.stderr) process.stdout.write(paint('33', r.stderr.endsWith('\n') ? r.stderr : `${r.stderr}\n`));
  if (r.code !== 0) out(paint('2', `(exit status ${r.code})`));
  const problem = expect?.(r);
  if (problem) {
    unexpected++;
    out(paint('1;31', `!! unexpected: ${problem}`));
  }
  return r;
}

async function mountpointIsMounted() {
  const r = await new Promise((resolve) => spawn('mountpoint', ['-q', MOUNT], { stdio: 'ignore' }).on('close', resolve).on('error', () => resolve(1)));
  return r === 0;
}

function cleanup() {
  cleaning ??= (async () => {
    const mount = children.find((c) => c.name === 'knowledgefs mount');
    const serve = children.find((c) => c.name === 'knowledgefs serve');
    if (mount) await stopChild(mount);
    if (mountedByUs && (await mountpointIsMounted())) {
      await new Promise((resolve) => spawn('fusermount', ['-uz', MOUNT], { stdio: 'ignore' }).on('close', resolve).on('error', resolve));
    }
    if (serve) await stopChild(serve);
    rmSync(tmp, { recursive: true, force: true });
    // Remove the mount point only once nothing is mounted on it.
    if (!(await mountpointIsMounted())) {
      try {
        if (existsSync(MOUNT) && readdirSync(MOUNT).length === 0) rmdirSync(MOUNT);
      } catch {
        // left in place: harmless, ignored by git
      }
    }
  })();
  return cleaning;
}

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    out(`\n${sig === 'SIGINT' ? 'Ctrl-C' : sig}: unmounting and stopping…`);
    cleanup().then(
      () => {
        out('cleaned up: nothing mounted, no process left.');
        process.exit(sig === 'SIGINT' ? 0 : 1);
      },
      (err) => {
        process.stderr.write(`demo: clean-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(1);
      },
    );
  });
}

function kib(bytes) {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

function sizeOf(dir) {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    total += entry.isDirectory() ? sizeOf(p) : statSync(p).size;
  }
  return total;
}

/** WORK as the user will type it: relative to where they are when that is shorter and inside. */
function shown(path) {
  const rel = relative(process.cwd(), path);
  return rel === '' ? '.' : rel.startsWith('..') ? path : rel;
}

async function main() {
  mkdirSync(WORK, { recursive: true });
  cpSync(EXAMPLES, DATA, { recursive: true });
  mkdirSync(SHIMS);
  writeFileSync(join(SHIMS, 'knowledgefs'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
  const adminToken = `kfsadmin_demo_${randomBytes(24).toString('hex')}`;

  out(paint('1', 'knowledgefs demo'));
  explain(`data dir (a copy of examples/knowledge-base): ${DATA}`);

  const serve = startChild(
    'knowledgefs serve',
    ['serve', '--data', DATA, '--listen', '127.0.0.1:0', '--state', join(tmp, 'state.json'), '--audit-log', join(tmp, 'audit.log'), '--scan-interval', '250ms'],
    { KNOWLEDGEFS_ADMIN_TOKEN: adminToken },
  );
  const [, url] = await waitForLine(serve, /listening on (http:\/\/\S+)/, 'knowledgefs serve');
  explain(`control plane: ${url} (pid ${serve.proc.pid})`);

  const created = await sh(
    `knowledgefs session create --server ${url} --kind personal --creator alice --team payments --json`,
    { KNOWLEDGEFS_ADMIN_TOKEN: adminToken },
  );
  if (created.code !== 0) throw new Error(`session create failed: ${created.stderr}`);
  const session = JSON.parse(created.stdout);
  writeFileSync(join(tmp, 'runner-token'), `${session.token}\n`, { mode: 0o600 });
  explain(`session ${session.sessionId}: personal, creator alice (payments + search), bound to payments`);

  const sizes = {
    account: sizeOf(join(DATA, 'account')),
    payments: sizeOf(join(DATA, 'teams', 'payments')),
    search: sizeOf(join(DATA, 'teams', 'search')),
  };
  const threshold = 16 * 1024;
  explain(
    `prefetch threshold ${kib(threshold)} < account + payments + search = ${kib(sizes.account + sizes.payments + sizes.search)}, ` +
      'so only account + the bound team are materialised',
  );

  const mount = startChild('knowledgefs mount', [
    'mount', MOUNT,
    '--server', url,
    '--token-file', join(tmp, 'runner-token'),
    '--socket', SOCKET,
    '--prefetch-threshold', String(threshold),
    '--sync-interval', '500ms',
  ]);
  const [ready] = await waitForLine(mount, /^mounted .*$/m, 'knowledgefs mount');
  mountedByUs = true;
  explain(`${ready} (pid ${mount.proc.pid}); commands below run in ${shown(WORK)}`);

  heading(1, 'What is materialised: ls');
  explain('account and the bound team only; search is loadable but not on disk, storage is not loadable at all.');
  await step('ls knowledge', (r) => (r.stdout === 'account\nteam_payments\n' ? null : 'expected account and team_payments'));
  await step('ls knowledge/team_payments knowledge/team_payments/runbooks');

  heading(2, 'Shell tools never load anything: cat on an unmounted team');
  await step('cat knowledge/team_search/DUTY.md', (r) =>
    r.code !== 0 && /No such file or directory/.test(r.stderr) ? null : 'expected "No such file or directory"');

  heading(3, 'The read tool loads it (alice is in search) and mounts the team');
  await step('knowledgefs read knowledge/team_search/DUTY.md | head -n 12', (r) =>
    r.stdout.startsWith('# Search & Discovery') ? null : 'expected the search DUTY.md');

  heading(4, 'Now ls and grep -r see the whole team');
  await step('ls knowledge', (r) => (r.stdout === 'account\nteam_payments\nteam_search\n' ? null : 'expected team_search to appear'));
  await step('grep -rl "OpenSearch" knowledge', (r) =>
    r.stdout.includes('knowledge/team_search/runbooks/cluster-red.md') ? null : 'expected search runbooks in the results');

  heading(5, 'The manifest: account, the bound team, and mounted teams in their own section');
  explain('(section headings only; the full text carries each DUTY.md body)');
  await step("knowledgefs manifest | grep -E '^(## (Scopes|Mounted)|### )'", (r) =>
    /## Mounted teams\n### team_search/.test(r.stdout) ? null : 'expected team_search under "Mounted teams"');

  heading(6, 'An edit to a file the agent read, and the reminder');
  await step('knowledgefs read knowledge/team_payments/runbooks/psp-failover.md | head -n 3');
  const edited = join(DATA, 'teams', 'payments', 'runbooks', 'psp-failover.md');
  const line = 'Update: Cobalt Acquiring raised our rate limit to 1 200 req/s.';
  out(paint('1', `$ echo '${line}' >> ${edited}`));
  appendFileSync(edited, `\n${line}\n`);
  explain('(waiting for the mount to pick the edit up…)');
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await sh('tail -n 1 knowledge/team_payments/runbooks/psp-failover.md');
    if (r.stdout.includes('1 200 req/s')) break;
    if (Date.now() > deadline) {
      unexpected++;
      out(paint('1;31', '!! unexpected: the edit did not reach the mount within 20 s'));
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await step('tail -n 1 knowledge/team_payments/runbooks/psp-failover.md');
  await step('knowledgefs reminder', (r) =>
    r.stdout.includes('knowledge/team_payments/runbooks/psp-failover.md') ? null : 'expected the edited file in the reminder');
  explain('each change is reported once: asking again only gives the date.');
  await step('knowledgefs reminder', (r) => (r.stdout.includes('psp-failover.md') ? 'reported twice' : null));

  heading(7, 'A team alice is not in looks exactly like a missing file');
  const storage = await step('knowledgefs read knowledge/team_storage/DUTY.md');
  const missing = await step('knowledgefs read knowledge/team_payments/no-such-file.md');
  const normalise = (s) => s.replaceAll('team_storage/DUTY.md', 'X').replaceAll('team_payments/no-such-file.md', 'X');
  if (storage.code !== missing.code || normalise(storage.stderr) !== normalise(missing.stderr) || storage.code !== 1) {
    unexpected++;
    out(paint('1;31', '!! unexpected: the storage denial differs from a missing file'));
  } else {
    explain(`same exit status (${storage.code}) and the same message shape: no hint that team_storage exists.`);
  }

  out();
  if (unexpected > 0) out(paint('1;31', `${unexpected} step(s) did not behave as expected (see "!! unexpected" above).`));
  else out(paint('1;32', 'walkthrough complete: every step behaved as expected.'));
}

let code = 0;
try {
  await main();
  if (unexpected > 0) code = 1;
} catch (err) {
  process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n`);
  code = 1;
}

if (noWait || code !== 0 || stopping) {
  if (!stopping) {
    await cleanup();
    out('cleaned up: nothing mounted, no process left.');
    process.exit(code);
  }
} else {
  out(`
${paint('1', 'The mount stays up. Explore it from another terminal:')}

  cd ${WORK}
  export KNOWLEDGEFS_SOCKET=${SOCKET}
  alias knowledgefs='node ${BIN}'
  ls knowledge && grep -rn "failover" knowledge | head
  knowledgefs read knowledge/team_search/runbooks/reindex.md
  knowledgefs manifest
  knowledgefs reminder

(or from here: ${shown(MOUNT)}). Data dir (edit files here, watch the mount follow): ${DATA}
Press Ctrl-C to unmount and stop everything.`);
  setInterval(() => {}, 1 << 30); // stay up; the signal handlers clean up and exit
}
