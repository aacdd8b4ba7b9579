// `knowledgefs doctor`: each machine check fails when pointed at a broken
// machine (injected probes: a missing device, a regular file posing as one,
// no libfuse, no fusermount, no user_allow_other), and the network checks
// run the real CLI against a real control plane on 127.0.0.1: a valid token,
// a wrong one, a deleted session, a stopped server, plus the daemon socket
// and mount point checks. The token is never printed.

import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkDevFuse,
  checkFusermount,
  checkFuseNative,
  checkLibfuse,
  checkMountpoint,
  checkPermissions,
  systemProbes,
  type Probes,
} from '../src/cli/commands/doctor-checks.js';
import { formatChecks, runDoctor } from '../src/cli/commands/doctor.js';
import { startControlSocket } from '../src/daemon/socket/control-socket.js';
import { BIN } from './helpers/control-plane.js';
import { run } from './helpers/mount.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';

const tmp = mkdtempSync(join(tmpdir(), 'kfs-doctor-'));
const base: Probes = { ...systemProbes(process.env) };

interface Run { code: number | null; stdout: string; stderr: string }

function doctor(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const defaults = { KNOWLEDGEFS_SOCKET: join(tmp, 'no-daemon.sock'), KNOWLEDGEFS_TOKEN: '', KNOWLEDGEFS_SERVER: '' };
  return run(process.execPath, [BIN, 'doctor', ...args], { env: { ...defaults, ...env }, timeoutMs: 60_000 });
}

const fuseHere = (existsSync('/dev/fuse') && process.getuid?.() === 0) || process.env.CI === 'true';
const line = (out: string, name: string) => out.split('\n').find((l) => new RegExp(`^\\S+\\s+${name}\\s`).test(l)) ?? '';

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('machine checks (injected probes)', () => {
  it('a missing /dev/fuse fails with the container fix', async () => {
    const r = await checkDevFuse({ ...base, devFuse: join(tmp, 'missing-fuse') });
    expect(r.status).toBe('FAIL');
    expect(r.detail).toMatch(/missing/);
    expect(r.fix).toMatch(/--device \/dev\/fuse --cap-add SYS_ADMIN/);
  });

  it('a regular file where /dev/fuse should be fails', async () => {
    const fake = join(tmp, 'fake-fuse');
    writeFileSync(fake, '');
    const r = await checkDevFuse({ ...base, devFuse: fake });
    expect(r.status).toBe('FAIL');
    expect(r.detail).toMatch(/not a character device/);
  });

  const noNative = async () => ({ loads: false as const, why: 'no prebuilt for linux-riscv64; no C compiler (gcc) to build it from source', canBuild: false });

  it('no native binding and no libfuse.so.2 anywhere fails with why and what to install', async () => {
    const r = await checkLibfuse({ ...base, nativeBinding: noNative, ldconfig: async () => 'libc.so.6 (libc6,x86-64) => /lib/libc.so.6\n', libfusePaths: [join(tmp, 'libfuse.so.2')] });
    expect(r).toMatchObject({
      name: 'fuse binding',
      status: 'FAIL',
      detail: expect.stringMatching(/native does not load \(no prebuilt for linux-riscv64; no C compiler/),
      fix: expect.stringMatching(/libfuse3-3 fuse3.*libfuse2/),
    });
  });

  it('a native binding that loads is the one named, with where it comes from', async () => {
    const r = await checkLibfuse({ ...base, nativeBinding: async () => ({ loads: true, origin: 'prebuilt linux-x64' }), ldconfig: async () => '', libfusePaths: [] });
    expect(r).toMatchObject({ status: 'ok', detail: 'native (prebuilt linux-x64): a mount uses it' });
  });

  it('no prebuilt but a compiler: native, built at the first mount (a note)', async () => {
    const r = await checkLibfuse({ ...base, nativeBinding: async () => ({ loads: false, why: 'no prebuilt for linux-riscv64', canBuild: true }), ldconfig: async () => '', libfusePaths: [] });
    expect(r).toMatchObject({ status: 'note', detail: 'native, built from source at the first mount (no prebuilt for linux-riscv64)' });
  });

  it('without native, fuse-native on libfuse.so.2 found through ldconfig or a known path, saying why not native', async () => {
    const viaLdconfig = await checkLibfuse({ ...base, nativeBinding: noNative, ldconfig: async () => '\tlibfuse.so.2 (libc6,x86-64) => /x/libfuse.so.2\n', libfusePaths: [] });
    expect(viaLdconfig).toMatchObject({ status: 'ok', detail: 'fuse-native (libfuse.so.2 at /x/libfuse.so.2); native does not load: no prebuilt for linux-riscv64; no C compiler (gcc) to build it from source' });
    const lib = join(tmp, 'libfuse.so.2');
    writeFileSync(lib, '');
    const viaPath = await checkLibfuse({ ...base, nativeBinding: noNative, ldconfig: async () => undefined, libfusePaths: [lib] });
    expect(viaPath).toMatchObject({ status: 'ok', detail: expect.stringContaining(`fuse-native (libfuse.so.2 at ${lib})`) });
  });

  it('without native and without fuse-native installed, libfuse.so.2 alone is no fallback: FAIL naming the native packages', async () => {
    const r = await checkLibfuse({ ...base, nativeBinding: noNative, fuseNative: async () => false, ldconfig: async () => '\tlibfuse.so.2 (libc6,x86-64) => /x/libfuse.so.2\n', libfusePaths: [] });
    expect(r).toMatchObject({ status: 'FAIL', detail: expect.stringMatching(/native does not load \(no prebuilt .*\), and fuse-native is not installed to fall back on/), fix: expect.stringMatching(/libfuse3-3 fuse3/) });
  });

  it('fuse-native absent is one note line saying it is optional and how to add it; present is ok', async () => {
    const absent = await checkFuseNative({ ...base, fuseNative: async () => false });
    expect(absent).toMatchObject({ name: 'fuse-native', status: 'note', detail: expect.stringMatching(/^not installed \(the optional libfuse 2 fallback/) });
    expect(absent.fix).toMatch(/npm i -g fuse-native@2\.2\.6/);
    expect(formatChecks([absent]).split('\n').filter((l) => l.includes('fuse-native'))).toHaveLength(1);
    expect(await checkFuseNative({ ...base, fuseNative: async () => true })).toMatchObject({ status: 'ok' });
  });

  it('fusermount missing from PATH fails with the package to install', async () => {
    const r = await checkFusermount({ ...base, pathEnv: tmp });
    expect(r).toMatchObject({ status: 'FAIL', fix: 'apt-get install -y fuse' });
  });

  it('a non-root user without user_allow_other gets a note, with it an ok', async () => {
    const conf = join(tmp, 'fuse.conf');
    writeFileSync(conf, '# mount_max = 1000\n#user_allow_other\n');
    const without = await checkPermissions({ ...base, uid: 1000, fuseConf: conf });
    expect(without).toMatchObject({ status: 'note', fix: `as root: echo user_allow_other >> ${conf}` });
    writeFileSync(conf, 'user_allow_other\n');
    expect((await checkPermissions({ ...base, uid: 1000, fuseConf: conf })).status).toBe('ok');
    expect((await checkPermissions({ ...base, uid: 0, fuseConf: join(tmp, 'none') })).status).toBe('ok');
  });

  it('a non-root user is told whether it is in the group owning /dev/fuse', async () => {
    const dev = join(tmp, 'group-dev');
    writeFileSync(dev, '');
    chmodSync(dev, 0o660);
    const gid = statSync(dev).gid;
    const conf = join(tmp, 'none.conf');
    const inGroup = await checkPermissions({ ...base, uid: 1000, groups: [gid], devFuse: dev, fuseConf: conf });
    expect(inGroup.detail).toContain(`member of group ${gid}, which owns ${dev}`);
    const outside = await checkPermissions({ ...base, uid: 1000, groups: [gid + 1], devFuse: dev, fuseConf: conf });
    expect(outside.detail).toContain(`not in group ${gid}, which owns ${dev}`);
    chmodSync(dev, 0o600);
    const ownerOnly = await checkPermissions({ ...base, uid: 1000, groups: [gid], devFuse: dev, fuseConf: conf });
    expect(ownerOnly.detail).toContain(`${dev} is mode 0600: only its owner`);
    chmodSync(dev, 0o666);
    const open = await checkPermissions({ ...base, uid: 1000, groups: [], devFuse: dev, fuseConf: conf });
    expect(open.detail).toContain('is open to everyone (mode 0666)');
  });

  it('a FAIL anywhere makes runDoctor report failure, and the output says how many', async () => {
    const results = await runDoctor({ socket: join(tmp, 'none.sock') }, { PATH: tmp }, { ...base, pathEnv: tmp, devFuse: join(tmp, 'missing') });
    const text = formatChecks(results);
    expect(text).toMatch(/^FAIL\s+fusermount\s.*fix: apt-get install -y fuse$/m);
    expect(text).toMatch(/^skip\s+control plane\s+no --server given/m);
    expect(text.trimEnd().split('\n').at(-1)).toMatch(/^\d+ checks? failed$/);
  });

  it('a mount point is reported not mounted, mounted, or missing', async () => {
    expect((await checkMountpoint(tmp, 2_000)).status).toBe('note');
    expect(await checkMountpoint('/proc', 2_000)).toMatchObject({ status: 'ok', detail: '/proc is mounted and answers' });
    expect(await checkMountpoint(join(tmp, 'nope'), 2_000)).toMatchObject({ status: 'note', detail: `${join(tmp, 'nope')} does not exist yet (\`knowledgefs mount\` creates it)` });
  });
});

describe('knowledgefs doctor against a real control plane', () => {
  let dataDir: string;
  let cp: TestControlPlane;
  let token: string;
  let sessionId: string;
  const tokenFile = join(tmp, 'runner-token');

  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search' },
      users: { alice: { teams: ['payments', 'search'] } },
      files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' },
    });
    cp = await startControlPlane({ dataDir });
    ({ token, sessionId } = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' }));
    writeFileSync(tokenFile, `${token}\n`);
  });
  afterAll(async () => {
    await cp?.close();
    if (dataDir) await removeDataDir(dataDir);
  });

  it('a valid token: control plane and token ok, session described, token not printed', async () => {
    const r = await doctor(['--server', cp.url, '--token-file', tokenFile]);
    expect(line(r.stdout, 'control plane')).toMatch(/^ok\s+control plane\s+http:\/\/127\.0\.0\.1:\d+\/healthz answered in \d+ ms$/);
    expect(line(r.stdout, 'token')).toContain(`session ${sessionId} (personal, creator alice, bound to payments)`);
    expect(line(r.stdout, 'token')).toMatch(/^ok\s/);
    expect(r.stdout + r.stderr).not.toContain(token);
    // Exit status follows the machine checks of wherever the suite runs.
    expect(r.code).toBe(/^FAIL/m.test(r.stdout) ? 1 : 0);
  });

  it('the token can come from KNOWLEDGEFS_TOKEN and the server from KNOWLEDGEFS_SERVER', async () => {
    const r = await doctor([], { KNOWLEDGEFS_SERVER: cp.url, KNOWLEDGEFS_TOKEN: token });
    expect(line(r.stdout, 'token')).toMatch(/^ok\s+token\s+KNOWLEDGEFS_TOKEN is valid/);
  });

  it('a wrong token fails with the fix, exit 1, and is not printed', async () => {
    const wrong = join(tmp, 'wrong-token');
    writeFileSync(wrong, 'kfs_not_a_real_token_0123456789abcdef\n');
    const r = await doctor(['--server', cp.url, '--token-file', wrong]);
    expect(r.code).toBe(1);
    expect(line(r.stdout, 'token')).toMatch(/^FAIL\s+token\s+.*refused \(401.*fix: create a session: knowledgefs session create/);
    expect(r.stdout).not.toContain('kfs_not_a_real_token');
  });

  it('a deleted session\'s token fails', async () => {
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'search' });
    const file = join(tmp, 'deleted-token');
    writeFileSync(file, s.token);
    const del = await fetch(`${cp.url}/v1/admin/sessions/${s.sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${cp.adminToken}` } });
    expect(del.status).toBe(204);
    const r = await doctor(['--server', cp.url, '--token-file', file, '--json']);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { ok: boolean; checks: { name: string; status: string }[] };
    expect(out.ok).toBe(false);
    expect(out.checks.find((c) => c.name === 'token')?.status).toBe('FAIL');
  });

  it('an unreadable token file fails and names the file', async () => {
    const r = await doctor(['--server', cp.url, '--token-file', join(tmp, 'no-such-token')]);
    expect(r.code).toBe(1);
    expect(line(r.stdout, 'token')).toMatch(/^FAIL\s+token\s+cannot read .*no-such-token: ENOENT/);
  });

  it('a running daemon socket is described', async () => {
    const sockPath = join(tmp, 'daemon.sock');
    const sock = await startControlSocket(sockPath, {
      mountpoint: '/workspace/knowledge',
      hasFile: () => false,
      read: async () => { throw new Error('unused'); },
      canLoad: async () => { throw new Error('unused'); },
      manifest: async () => ({ text: '', sha256: '' }),
      reminder: async () => ({ text: '', date: '2025-01-01', changed: [], deleted: [] }),
      refreshPlan: async () => {},
      status: () => ({ mountpoint: '/workspace/knowledge', sessionId: 's1', planVersion: 'v', files: 42, scopes: ['account', 'team_payments'], prefetch: { done: 42, total: 42 } }),
    });
    try {
      const r = await doctor(['--socket', sockPath]);
      expect(line(r.stdout, 'mount daemon')).toBe(
        `ok    mount daemon   ${sockPath}: /workspace/knowledge mounted, 42 files in account, team_payments, prefetched 42/42`,
      );
    } finally {
      await sock.close();
    }
  });

  it.skipIf(!fuseHere)('a live mount is ok; after its daemon is SIGKILLed the stale mount FAILs with the fusermount fix', async () => {
    const mp = join(tmp, 'knowledge');
    const sockPath = join(tmp, 'mount.sock');
    const daemon = spawn(process.execPath, [BIN, 'mount', mp, '--server', cp.url, '--socket', sockPath, '--prefetch-content', 'off'], {
      env: { ...process.env, KNOWLEDGEFS_TOKEN: token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        daemon.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          if (out.includes('mounted ')) resolve();
        });
        daemon.once('exit', (code) => reject(new Error(`mount exited ${code}`)));
      });
      const live = await doctor(['--mountpoint', mp, '--socket', sockPath]);
      expect(line(live.stdout, 'mount point')).toMatch(/^ok\s+mount point\s+.* is mounted and answers$/);
      expect(line(live.stdout, 'mount daemon')).toMatch(new RegExp(`^ok\\s+mount daemon\\s+${sockPath}: ${mp} mounted, 2 files in account, team_payments`));
      const exited = new Promise((resolve) => daemon.once('exit', resolve));
      daemon.kill('SIGKILL');
      await exited;
      const stale = await doctor(['--mountpoint', mp, '--socket', sockPath]);
      expect(stale.code, stale.stdout).toBe(1);
      expect(line(stale.stdout, 'mount point')).toBe(
        `FAIL  mount point    ${mp} is a stale mount (transport endpoint is not connected: its daemon is gone) — fix: fusermount -uz ${mp} (then start \`knowledgefs mount\` again)`,
      );
    } finally {
      daemon.kill('SIGKILL');
      await new Promise<void>((resolve) => spawn('fusermount', ['-uz', mp], { stdio: 'ignore' }).on('close', () => resolve()).on('error', () => resolve()));
    }
  });

  it('a stopped control plane fails reachability and skips the token', async () => {
    const other = await startControlPlane({ dataDir });
    const url = other.url;
    await other.close();
    const r = await doctor(['--server', url, '--token-file', tokenFile, '--timeout', '2s']);
    expect(r.code).toBe(1);
    expect(line(r.stdout, 'control plane')).toMatch(/^FAIL\s+control plane\s+.*connection refused .*fix: start `knowledgefs serve`/);
    expect(line(r.stdout, 'token')).toMatch(/^skip\s+token\s+control plane unreachable$/);
  });

  it('a bad --timeout value is a usage error (exit 2)', async () => {
    const r = await doctor(['--timeout', 'soon']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/invalid duration "soon"/);
  });
});
