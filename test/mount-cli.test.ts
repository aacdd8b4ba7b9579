// `knowledgefs mount` as a command: the ready line, a clean SIGINT/SIGTERM
// exit (unmounted, exit 0), the token kept out of argv, logs and the mount,
// the control socket at 0600, clear errors for a missing token and an
// unreachable control plane (exit 4), and a missing mount point created.

import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { fuseSuite, isMounted, run, startMount, type MountHandle } from './helpers/mount.js';

let cp: TestControlPlane;
let dataDir: string;
let scratch: string;
const mounts: MountHandle[] = [];

fuseSuite('knowledgefs mount (command)', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: { payments: 'Payments' },
      users: { alice: { teams: ['payments'] } },
      files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' },
    });
    cp = await startControlPlane({ dataDir });
    scratch = await mkdtemp(join(tmpdir(), 'kfs-mount-cli-'));
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await cp?.close();
    await removeDataDir(dataDir);
    await rm(scratch, { recursive: true, force: true });
  });

  it('prints the ready line, keeps the token out of argv, logs and the mount, socket 0600; SIGINT unmounts and exits 0', async () => {
    const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const nested = join(scratch, 'does', 'not', 'exist', 'knowledge');
    const m = await startMount({ serverUrl: cp.url, token, mountpoint: nested });
    mounts.push(m);
    expect(m.readyLine).toBe(`mounted ${nested} (2 files, 2 scopes)`);
    const cmdline = await readFile(`/proc/${m.pid}/cmdline`, 'utf8');
    expect(cmdline).not.toContain(token);
    const environ = await readFile(`/proc/${m.pid}/environ`, 'utf8');
    expect(environ).not.toContain(token);
    const grep = await run('grep', ['-rF', token, m.mountpoint]);
    expect(grep.code).toBe(1);
    expect(((await stat(m.socketPath)).mode & 0o777).toString(8)).toBe('600');

    m.child.kill('SIGINT');
    const { code } = await m.exited;
    expect(code).toBe(0);
    expect(isMounted(nested)).toBe(false);
    expect(m.stdout + m.stderr).not.toContain(token);
  });

  it('SIGTERM also exits 0 with the mount gone', async () => {
    const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const m = await startMount({ serverUrl: cp.url, token });
    mounts.push(m);
    m.child.kill('SIGTERM');
    expect((await m.exited).code).toBe(0);
    expect(isMounted(m.mountpoint)).toBe(false);
  });

  const runCli = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, KNOWLEDGEFS_TOKEN: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c) => (stdout += c));
      child.stderr.on('data', (c) => (stderr += c));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  it('no token → usage error naming --token-file and KNOWLEDGEFS_TOKEN; empty token file → clear error', async () => {
    const none = await runCli(['mount', join(scratch, 'k1'), '--server', cp.url]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--token-file');
    expect(none.stderr).toContain('KNOWLEDGEFS_TOKEN');
    const empty = join(scratch, 'empty-token');
    await writeFile(empty, '  \n');
    const r = await runCli(['mount', join(scratch, 'k2'), '--server', cp.url, '--token-file', empty]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('empty');
  });

  it('control plane unreachable at start → exit 4 with a message naming the server', async () => {
    const r = await runCli(['mount', join(scratch, 'k3'), '--server', 'http://127.0.0.1:1', '--request-timeout', '500ms'], { KNOWLEDGEFS_TOKEN: 'kfs_whatever' });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('http://127.0.0.1:1');
    expect(r.stderr).toContain('knowledgefs serve');
    expect(r.stderr).not.toContain('kfs_whatever');
    expect(isMounted(join(scratch, 'k3'))).toBe(false);
  });

  it('a wrong token → a clear message, non-zero exit, nothing mounted', async () => {
    const r = await runCli(['mount', join(scratch, 'k4'), '--server', cp.url], { KNOWLEDGEFS_TOKEN: 'kfs_not_a_real_token' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('rejected the runner token');
    expect(isMounted(join(scratch, 'k4'))).toBe(false);
  });

  it('bad flag values are one clear line and exit 2', async () => {
    const r = await runCli(['mount', join(scratch, 'k5'), '--server', cp.url, '--grant-ttl', 'soon']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('invalid duration "soon"');
    const binding = await runCli(['mount', join(scratch, 'k6'), '--server', cp.url, '--fuse-binding', 'libfuse9']);
    expect(binding.code).toBe(2);
    expect(binding.stderr).toMatch(/--fuse-binding.*libfuse9.*auto, native, fuse-native/s);
    const h = await runCli(['mount', '--help']);
    for (const flag of ['--prefetch-threshold', '--prefetch-content', '--cache-dir', '--cache-size', '--grant-ttl', '--sync-interval', '--request-timeout', '--socket', '--allow-other', '--token-file', '--fuse-binding']) {
      expect(h.stdout).toContain(flag);
    }
  });
});
