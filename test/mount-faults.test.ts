// The mount under control-plane faults, through real `cat`/`ls`: a killed
// control plane makes uncached opens fail with EIO within the request
// timeout (never a hang, never empty or partial content) and the mount
// recovers by itself after a restart; a control plane (behind a fault proxy)
// that flips, truncates or garbles bytes, or hangs, is an I/O error, never
// the bad bytes. A killed daemon's stale mount is cleaned at the next start.

import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnControlPlane, startControlPlane, type SpawnedControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';
import { fuseSuite, isMounted, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const FILES: Record<string, string> = {
  'account/DUTY.md': '# Account\n',
  'account/a.md': 'alpha content\n',
  'account/b.md': 'bravo content\n',
  'account/c.md': 'charlie content\n',
  'account/d.md': 'delta content\n'.repeat(1000),
  'teams/payments/DUTY.md': '# Payments\n',
};
const TIMEOUT_MS = 1000;
/** "No hang" bound: the request timeout plus generous slack for a busy machine. */
const NO_HANG_MS = TIMEOUT_MS + 8000;
const FAULT_ARGS = ['--prefetch-content', 'off', '--request-timeout', `${TIMEOUT_MS}ms`, '--sync-interval', '300ms', '--grant-ttl', '300ms'];

const mounts: MountHandle[] = [];
let dataDir: string;

fuseSuite('mount faults', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: FILES });
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await removeDataDir(dataDir);
  });

  describe('control plane killed', () => {
    let cp: SpawnedControlPlane;
    afterAll(async () => {
      await cp?.kill('SIGKILL');
    });

    it('cat of an uncached file fails with EIO within the timeout; after a restart it works without remounting', async () => {
      cp = await spawnControlPlane({ dataDir });
      const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const m = await startMount({ serverUrl: cp.url, token, args: FAULT_ARGS });
      mounts.push(m);
      expect((await run('cat', [join(m.mountpoint, 'account/a.md')])).stdout).toBe('alpha content\n');

      await cp.kill('SIGKILL');
      const down = await run('cat', [join(m.mountpoint, 'account/b.md')], { timeoutMs: 60_000 });
      expect(down.timedOut).toBe(false);
      expect(down.ms).toBeLessThan(NO_HANG_MS);
      expect(down.code).not.toBe(0);
      expect(down.stdout).toBe('');
      expect(down.stderr).toContain('Input/output error');
      // Metadata keeps working from the last tree.
      const ls = await run('ls', [join(m.mountpoint, 'account')]);
      expect(ls.stdout.split('\n').filter(Boolean)).toEqual(['DUTY.md', 'a.md', 'b.md', 'c.md', 'd.md']);
      // A cached file with an expired grant fails closed too, and quickly.
      await new Promise((r) => setTimeout(r, 400));
      const cached = await run('cat', [join(m.mountpoint, 'account/a.md')], { timeoutMs: 60_000 });
      expect(cached.ms).toBeLessThan(NO_HANG_MS);
      expect(cached.stderr).toContain('Input/output error');
      expect(cached.stdout).toBe('');

      await cp.restart();
      const back = await waitFor(async () => (await run('cat', [join(m.mountpoint, 'account/b.md')])).stdout === 'bravo content\n', 20_000, 200);
      expect(back).toBe(true);
      expect(m.child.exitCode).toBeNull();
      // The sync loop notices too (it backs off while the control plane is down).
      expect(await waitFor(() => m.stderr.includes('sync: control plane reachable again'), 20_000)).toBe(true);
    });
  });

  describe('bad bytes and hangs behind a proxy', () => {
    let cp: TestControlPlane;
    let proxy: FaultProxy;
    let m: MountHandle;

    beforeAll(async () => {
      cp = await startControlPlane({ dataDir });
      proxy = await startFaultProxy(cp.url);
      const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      // No memory cache: every open reaches the (faulty) network, and no read-ahead
      // brings a file in before the test that breaks its body.
      m = await startMount({ serverUrl: proxy.url, token, args: [...FAULT_ARGS, '--cache-size', '0'] });
      mounts.push(m);
    });

    afterAll(async () => {
      await m?.stop();
      await proxy?.close();
      await cp?.close();
    });

    const files = (method: string, url: string) => url.startsWith('/v1/files/') || url.startsWith('/v1/batch');

    it('flipped bytes (same length, same sha256 header) → EIO, never the bad bytes', async () => {
      proxy.setRules([{ mode: { kind: 'flip' }, match: files }]);
      const r = await run('cat', [join(m.mountpoint, 'account/c.md')], { timeoutMs: 60_000 });
      expect(r.code).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Input/output error');
      expect(r.ms).toBeLessThan(NO_HANG_MS);
      expect(m.stderr).toContain('integrity: account/c.md');
      // Once the bytes are right again, the same file reads correctly.
      proxy.setRules([]);
      expect((await run('cat', [join(m.mountpoint, 'account/c.md')])).stdout).toBe('charlie content\n');
    });

    it('a truncated body → EIO, never partial content', async () => {
      proxy.setRules([{ mode: { kind: 'truncate' }, match: files }]);
      const r = await run('cat', [join(m.mountpoint, 'account/d.md')], { timeoutMs: 60_000 });
      expect(r.code).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Input/output error');
      proxy.setRules([]);
      expect((await run('cat', [join(m.mountpoint, 'account/d.md')])).stdout).toBe(FILES['account/d.md']);
    });

    it('garbage and 500s → EIO; a hung control plane → EIO within the request timeout', async () => {
      for (const mode of [{ kind: 'garbage' as const }, { kind: 'status' as const, status: 500 }, { kind: 'hang' as const }, { kind: 'reset' as const }]) {
        proxy.setRules([{ mode, match: (method, url) => url.startsWith('/v1/files/') || url.startsWith('/v1/grants/') }]);
        await new Promise((r) => setTimeout(r, 400)); // let the cached grant expire
        const r = await run('cat', [join(m.mountpoint, 'account/a.md')], { timeoutMs: 60_000 });
        expect(r.timedOut, mode.kind).toBe(false);
        expect(r.ms, mode.kind).toBeLessThan(NO_HANG_MS);
        expect(r.stdout, mode.kind).toBe('');
        expect(r.stderr, mode.kind).toContain('Input/output error');
      }
      proxy.setRules([]);
      proxy.dropConnections();
      const back = await waitFor(async () => (await run('cat', [join(m.mountpoint, 'account/a.md')])).stdout === 'alpha content\n', 20_000, 200);
      expect(back).toBe(true);
    });
  });

  describe('daemon killed', () => {
    let cp: TestControlPlane;
    afterAll(async () => {
      await cp?.close();
    });

    it('a stale mount left by SIGKILL is cleaned up at the next start, with a message', async () => {
      cp = await startControlPlane({ dataDir });
      const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const first = await startMount({ serverUrl: cp.url, token, args: FAULT_ARGS });
      mounts.push(first);
      await first.kill('SIGKILL');
      expect(isMounted(first.mountpoint)).toBe(true);
      const dead = await run('ls', [first.mountpoint]);
      expect(dead.stderr).toContain('Transport endpoint is not connected');

      const second = await startMount({ serverUrl: cp.url, token, args: FAULT_ARGS, mountpoint: first.mountpoint });
      mounts.push(second);
      expect(second.stderr).toContain(`cleaned up a stale mount at ${first.mountpoint}`);
      expect((await run('cat', [join(second.mountpoint, 'account/a.md')])).stdout).toBe('alpha content\n');
      const { code } = await second.stop();
      expect(code).toBe(0);
      expect(isMounted(second.mountpoint)).toBe(false);
    });
  });
});
