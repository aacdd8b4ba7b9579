// SIGTERM/SIGINT always end the mount daemon within a bound, whatever state
// the mount is in: after a container runtime or an operator detached it
// (`fusermount -uz`) the unmount fails, and the daemon must still exit.
// Real mounts, real signals.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { fuseSuite, isMounted, run, startMount, type MountHandle } from './helpers/mount.js';

fuseSuite('stopping the mount daemon', () => {
  let dir: string;
  let cp: TestControlPlane;
  const mounts: MountHandle[] = [];

  beforeAll(async () => {
    dir = await makeDataDir({
      teams: { payments: 'Payments' },
      users: { alice: { teams: ['payments'] } },
      files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' },
    });
    cp = await startControlPlane({ dataDir: dir });
  });
  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await cp?.close();
    await removeDataDir(dir);
  });

  async function mount(): Promise<MountHandle> {
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const m = await startMount({ serverUrl: cp.url, token: s.token, args: ['--prefetch-content', 'off'] });
    mounts.push(m);
    return m;
  }

  /** Waits for the exit, or gives up after `ms` (a hang); never SIGKILLs by itself. */
  async function exitWithin(m: MountHandle, ms: number) {
    const started = Date.now();
    const result = await Promise.race([m.exited, new Promise<null>((r) => setTimeout(() => r(null), ms))]);
    return { result, ms: Date.now() - started };
  }

  it.each(['SIGTERM', 'SIGINT'] as const)('%s after the mount was detached (fusermount -uz): the daemon exits, saying why', async (signal) => {
    const m = await mount();
    expect((await run('cat', [`${m.mountpoint}/account/DUTY.md`])).stdout).toBe('# Account\n');
    expect((await run('fusermount', ['-uz', m.mountpoint])).code).toBe(0);
    expect(isMounted(m.mountpoint)).toBe(false);
    m.child.kill(signal);
    const { result } = await exitWithin(m, 30_000);
    expect(result).not.toBeNull();
    expect(result?.signal).toBeNull();
    expect(result?.code).toBe(0);
    expect(m.stderr, m.stderr).toMatch(/was already detached/);
  });

  it('a stuck unmount (fusermount hangs): the daemon exits anyway within its 10 s deadline, exit 6, saying so', async () => {
    const real = (await run('sh', ['-c', 'command -v fusermount'])).stdout.trim();
    const bin = mkdtempSync(join(tmpdir(), 'kfs-fakebin-'));
    const flag = join(bin, 'hang');
    // fuse-native unmounts through `fusermount -uz` found on PATH: this one hangs once the flag exists.
    writeFileSync(join(bin, 'fusermount'), `#!/bin/sh\nif [ -e ${flag} ]; then echo $$ > ${flag}.pid; exec sleep 60; fi\nexec ${real} "$@"\n`, { mode: 0o755 });
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    // fuse-native's unmount runs that fusermount; the native binding, as root, unmounts with umount2 and cannot hang there.
    const m = await startMount({ serverUrl: cp.url, token: s.token, args: ['--prefetch-content', 'off', '--fuse-binding', 'fuse-native'], env: { PATH: `${bin}:${process.env.PATH ?? ''}` } });
    mounts.push(m);
    try {
      writeFileSync(flag, '');
      m.child.kill('SIGTERM');
      const { result, ms } = await exitWithin(m, 30_000);
      expect(result).toEqual({ code: 6, signal: null });
      expect(ms).toBeGreaterThanOrEqual(9_000);
      expect(m.stderr).toContain('SIGTERM: the daemon did not stop within 10 s (an unmount may be stuck); exiting without a clean unmount (exit 6)');
    } finally {
      const pid = Number(readFileSync(`${flag}.pid`, 'utf8').trim());
      if (pid > 0) process.kill(pid, 'SIGKILL');
      rmSync(bin, { recursive: true, force: true });
    }
  }, 60_000);

  it('SIGTERM on a healthy mount still unmounts and exits 0', async () => {
    const m = await mount();
    m.child.kill('SIGTERM');
    const { result } = await exitWithin(m, 30_000);
    expect(result).toEqual({ code: 0, signal: null });
    expect(isMounted(m.mountpoint)).toBe(false);
  });
});
