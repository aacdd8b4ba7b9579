// docker/runner-entrypoint.sh, run outside Docker. Two kinds of daemon:
// - a stand-in `knowledgefs` (a small script that prints the ready line and
//   records its arguments, environment and the signal that stopped it), for
//   the entrypoint's own logic: exit-code propagation, signal forwarding,
//   token hiding, ready timeout, extra flags;
// - the real `knowledgefs mount` against a real control plane on 127.0.0.1,
//   for the whole path: the command sees knowledge/ and it is gone afterwards.

import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, REPO_ROOT, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';

const ENTRYPOINT = join(REPO_ROOT, 'docker', 'runner-entrypoint.sh');
const tmp = mkdtempSync(join(tmpdir(), 'kfs-entrypoint-'));
const FAKE = join(tmp, 'fake-knowledgefs');
const RECORD = join(tmp, 'fake-record.json');

// Prints the ready line (unless FAKE_NEVER_READY), records argv/env, waits
// for a signal, records it and exits 0 like the real daemon does.
writeFileSync(
  FAKE,
  `#!${process.execPath}
const fs = require('node:fs');
const rec = { argv: process.argv.slice(2), hasToken: 'KNOWLEDGEFS_TOKEN' in process.env, token: process.env.KNOWLEDGEFS_TOKEN ?? null, stoppedBy: null };
const save = () => fs.writeFileSync(${JSON.stringify(RECORD)}, JSON.stringify(rec));
save();
if (process.env.FAKE_EXIT_AT_ONCE) { process.stderr.write('fake: cannot mount\\n'); process.exit(9); }
if (!process.env.FAKE_NEVER_READY) process.stdout.write('mounted ' + process.argv[3] + ' (3 files, 2 scopes)\\n');
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => { rec.stoppedBy = sig; save(); process.exit(0); });
setInterval(() => {}, 1000);
`,
);
chmodSync(FAKE, 0o755);

interface Run { code: number | null; stdout: string; stderr: string }

function entrypoint(command: string[], env: Record<string, string>, onSpawn?: (pid: number, out: () => string) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KNOWLEDGEFS_')));
    const child = spawn('bash', [ENTRYPOINT, ...command], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    if (onSpawn && child.pid !== undefined) onSpawn(child.pid, () => stdout);
  });
}

const record = () => JSON.parse(readFileSync(RECORD, 'utf8')) as { argv: string[]; hasToken: boolean; token: string | null; stoppedBy: string | null };

function fakeEnv(extra: Record<string, string> = {}): Record<string, string> {
  const mp = join(tmp, 'workspace', 'knowledge');
  return {
    KNOWLEDGEFS_BIN: FAKE,
    KNOWLEDGEFS_SERVER: 'http://127.0.0.1:9',
    KNOWLEDGEFS_TOKEN: 'kfs_secret_token_value',
    KNOWLEDGEFS_MOUNTPOINT: mp,
    KNOWLEDGEFS_SOCKET: join(tmp, 'run', 'control.sock'),
    ...extra,
  };
}

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('runner entrypoint: configuration errors', () => {
  it('no KNOWLEDGEFS_SERVER → one clear line, exit 1, command not run', async () => {
    const r = await entrypoint(['touch', join(tmp, 'ran')], { KNOWLEDGEFS_TOKEN: 'x' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KNOWLEDGEFS_SERVER is not set/);
    expect(existsSync(join(tmp, 'ran'))).toBe(false);
  });

  it('no token → exit 1 naming both ways to give one', async () => {
    const r = await entrypoint(['true'], { KNOWLEDGEFS_SERVER: 'http://127.0.0.1:9' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KNOWLEDGEFS_TOKEN_FILE .* or KNOWLEDGEFS_TOKEN/);
  });

  it('an unreadable token file → exit 1', async () => {
    const r = await entrypoint(['true'], { KNOWLEDGEFS_SERVER: 'http://127.0.0.1:9', KNOWLEDGEFS_TOKEN_FILE: join(tmp, 'nope') });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KNOWLEDGEFS_TOKEN_FILE=.*nope is not a readable file/);
  });

  it('a daemon that exits before ready → its output, a clear line, exit 1, command not run', async () => {
    const r = await entrypoint(['touch', join(tmp, 'ran2')], fakeEnv({ FAKE_EXIT_AT_ONCE: '1' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('fake: cannot mount');
    expect(r.stderr).toMatch(/knowledgefs mount exited with code 9 before the mount was ready \(server http:\/\/127\.0\.0\.1:9/);
    expect(existsSync(join(tmp, 'ran2'))).toBe(false);
  });

  it('a daemon that never gets ready → stopped after the timeout, exit 1', async () => {
    // 3 s, not 1: on a busy machine the fake daemon (a Node process) may not have its SIGTERM handler within 1 s.
    const r = await entrypoint(['true'], fakeEnv({ FAKE_NEVER_READY: '1', KNOWLEDGEFS_READY_TIMEOUT: '3' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not ready after 3s/);
    expect(record().stoppedBy).toBe('SIGTERM');
  });
});

describe('runner entrypoint: with a stand-in daemon', () => {
  it('runs the command after the ready line, propagates its exit code, stops the daemon', async () => {
    const r = await entrypoint(['sh', '-c', 'echo "command ran; socket=$KNOWLEDGEFS_SOCKET"; exit 7'], fakeEnv());
    expect(r.code).toBe(7);
    expect(r.stdout).toBe(`command ran; socket=${join(tmp, 'run', 'control.sock')}\n`);
    expect(r.stderr).toContain(`mounted ${join(tmp, 'workspace', 'knowledge')} (3 files, 2 scopes)`);
    expect(record().stoppedBy).toBe('SIGTERM');
  });

  it('the token reaches the daemon through its environment only: not in argv, not in the command\'s env', async () => {
    const r = await entrypoint(['sh', '-c', 'echo "token=${KNOWLEDGEFS_TOKEN:-unset}"'], fakeEnv());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('token=unset\n');
    const rec = record();
    expect(rec.token).toBe('kfs_secret_token_value');
    expect(rec.argv.join(' ')).not.toContain('kfs_secret_token_value');
  });

  it('passes the mount point, server, socket, token file and KNOWLEDGEFS_MOUNT_ARGS to the daemon', async () => {
    const tokenFile = join(tmp, 'token');
    writeFileSync(tokenFile, 'abc\n');
    const r = await entrypoint(['true'], fakeEnv({ KNOWLEDGEFS_TOKEN: '', KNOWLEDGEFS_TOKEN_FILE: tokenFile, KNOWLEDGEFS_MOUNT_ARGS: '--grant-ttl 0  --prefetch-content off' }));
    expect(r.code).toBe(0);
    expect(record().argv).toEqual([
      'mount', join(tmp, 'workspace', 'knowledge'),
      '--server', 'http://127.0.0.1:9',
      '--socket', join(tmp, 'run', 'control.sock'),
      '--token-file', tokenFile,
      '--grant-ttl', '0', '--prefetch-content', 'off',
    ]);
  });

  it('forwards SIGTERM to the command and exits with the command\'s status', async () => {
    const script = 'trap "echo got-term; exit 42" TERM; echo started; while :; do sleep 0.1; done';
    const r = await entrypoint(['bash', '-c', script], fakeEnv(), (pid, out) => {
      const poll = setInterval(() => {
        if (out().includes('started')) {
          clearInterval(poll);
          process.kill(pid, 'SIGTERM');
        }
      }, 50);
    });
    expect(r.code).toBe(42);
    expect(r.stdout).toBe('started\ngot-term\n');
    expect(record().stoppedBy).toBe('SIGTERM');
  });

  it('forwards SIGINT to a command that keeps the default handler', async () => {
    const r = await entrypoint(['sh', '-c', 'echo started; exec sleep 30'], fakeEnv(), (pid, out) => {
      const poll = setInterval(() => {
        if (out().includes('started')) {
          clearInterval(poll);
          process.kill(pid, 'SIGINT');
        }
      }, 50);
    });
    expect(r.code).toBe(130);
    expect(record().stoppedBy).toBe('SIGTERM');
  });
});

// The real daemon and control plane. Skipped only where FUSE is missing and
// not in CI (CI=true must have FUSE).
const fuseHere = existsSync('/dev/fuse') && process.getuid?.() === 0;

describe.skipIf(!fuseHere && process.env.CI !== 'true')('runner entrypoint: real daemon, real control plane', () => {
  let dataDir: string;
  let cp: TestControlPlane;
  let token: string;
  const mp = join(tmp, 'real', 'workspace', 'knowledge');

  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search' },
      users: { alice: { teams: ['payments'] } },
      files: {
        'account/DUTY.md': '# Account duty\n',
        'teams/payments/DUTY.md': '# Payments duty\n',
        'teams/search/DUTY.md': '# Search duty\n',
      },
    });
    cp = await startControlPlane({ dataDir });
    ({ token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' }));
    mkdirSync(mp, { recursive: true });
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => spawn('fusermount', ['-uz', mp], { stdio: 'ignore' }).on('close', () => resolve()).on('error', () => resolve()));
    await cp?.close();
    if (dataDir) await removeDataDir(dataDir);
  });

  const realEnv = (extra: Record<string, string> = {}) => ({
    KNOWLEDGEFS_BIN: BIN,
    KNOWLEDGEFS_SERVER: cp.url,
    KNOWLEDGEFS_TOKEN: token,
    KNOWLEDGEFS_MOUNTPOINT: mp,
    KNOWLEDGEFS_SOCKET: join(tmp, 'real', 'control.sock'),
    KNOWLEDGEFS_MOUNT_ARGS: '--prefetch-content off',
    ...extra,
  });

  it('the command lists and reads knowledge/, the exit code propagates, nothing stays mounted', async () => {
    const r = await entrypoint(['sh', '-c', `ls "${mp}"; cat "${mp}/team_payments/DUTY.md"; knowledgefs_rc=3; exit $knowledgefs_rc`], realEnv());
    expect(r.stderr).toMatch(/mounted .*knowledge \(\d+ files, 2 scopes\)/);
    expect(r.stdout).toBe('account\nteam_payments\n# Payments duty\n');
    expect(r.code).toBe(3);
    const still = await new Promise<number | null>((resolve) => spawn('mountpoint', ['-q', mp]).on('close', resolve));
    expect(still).not.toBe(0);
  });

  it('the read tool works from the command through the exported socket', async () => {
    const r = await entrypoint([process.execPath, BIN, 'read', `${mp}/account/DUTY.md`], realEnv());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('# Account duty\n');
  });

  it('KNOWLEDGEFS_RUN_AS: the command runs unprivileged and still lists, reads and uses the read tool', async () => {
    chmodSync(tmp, 0o711); // let `nobody` traverse to the mount point and socket
    const script = `id -u; ls "${mp}"; "${process.execPath}" "${BIN}" read "${mp}/team_payments/DUTY.md"; echo "token=\${KNOWLEDGEFS_TOKEN:-unset}"; stat -c '%a %g' "${mp}/team_payments/DUTY.md"`;
    const r = await entrypoint(['sh', '-c', script], realEnv({ KNOWLEDGEFS_RUN_AS: 'nobody' }));
    expect(r.stderr).not.toMatch(/denied|cannot/i);
    // --group <nobody's primary group>: files 0440 owned by that group, so no other user of the container reads them.
    const gid = execFileSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).trim();
    expect(r.stdout).toBe(`65534\naccount\nteam_payments\n# Payments duty\ntoken=unset\n440 ${gid}\n`);
    expect(r.code).toBe(0);
  });

  it('no control plane → the daemon fails, a clear line, non-zero, nothing mounted', async () => {
    const r = await entrypoint(['true'], realEnv({ KNOWLEDGEFS_SERVER: 'http://127.0.0.1:9', KNOWLEDGEFS_MOUNT_ARGS: '--request-timeout 2s', KNOWLEDGEFS_READY_TIMEOUT: '30' }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/runner-entrypoint: (knowledgefs mount exited with code \d+ before the mount was ready|knowledge\/ not ready after)/);
    const still = await new Promise<number | null>((resolve) => spawn('mountpoint', ['-q', mp]).on('close', resolve));
    expect(still).not.toBe(0);
  });
});
