// --kernel-opens on, through real mounts and real tools: the kernel opens
// cached files by itself (OPEN answered ENOSYS once: FUSE_NO_OPEN_SUPPORT),
// so a warm `grep -r` sends the daemon no OPEN, RELEASE or FLUSH; and the
// authorisation bound still holds through the entries the kernel keeps
// (kernel-grant-bound.ts): once grants stop coming (the control plane
// refuses to answer them), no open of a file whose pages the kernel holds
// succeeds past --grant-ttl of the last grant, and opens come back by
// themselves when grants do. The rest of the native suite runs with the flag
// too (mount-native-kernel-opens.test.ts).

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DaemonStatus } from '../src/core/wire.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const FILES: Record<string, string> = { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' };
for (let i = 0; i < 40; i++) FILES[`teams/payments/runbooks/rb-${i}.md`] = `runbook ${i} marker\n`;
const TTL_MS = 1_000;
const POLL_MS = 20;

let data = '';
let cp: TestControlPlane;
let proxy: FaultProxy;
const mounts: MountHandle[] = [];

async function mountWith(args: readonly string[]): Promise<MountHandle> {
  const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
  const m = await startMount({ serverUrl: proxy.url, token, args: ['--fuse-binding', 'native', '--kernel-opens', 'on', ...args] });
  mounts.push(m);
  return m;
}

async function counts(m: MountHandle): Promise<Record<string, number>> {
  const r = await run(process.execPath, [BIN, 'status', '--socket', m.socketPath, '--json']);
  expect(r.code, r.stderr).toBe(0);
  const s = JSON.parse(r.stdout) as DaemonStatus;
  return Object.fromEntries((s.activity?.operations ?? []).map((o) => [o.op, o.count]));
}

/** Requests of each kind the daemon received between two `counts`. */
function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [op, n] of Object.entries(after)) if (n - (before[op] ?? 0) > 0) out[op] = n - (before[op] ?? 0);
  return out;
}

const grep = (m: MountHandle) => run('grep', ['-rc', 'marker', m.mountpoint]);

fuseSuite('--kernel-opens on (FUSE no-open)', () => {
  beforeAll(async () => {
    data = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: FILES });
    cp = await startControlPlane({ dataDir: data });
    proxy = await startFaultProxy(cp.url);
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await proxy?.close();
    await cp?.close();
    if (data) await removeDataDir(data);
  });

  it('a warm grep -r sends the daemon no OPEN, RELEASE or FLUSH, and within the grant no request at all', async () => {
    const m = await mountWith(['--grant-ttl', '60s', '--sync-interval', '200ms']);
    expect(m.stderr).toMatch(/kernel-opens on/);
    const first = await grep(m);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.split('\n').filter((l) => l.endsWith(':1'))).toHaveLength(40);
    const before = await counts(m);
    // Every file opened once before (its pages held): the second run is warm.
    const second = await grep(m);
    expect(second.stdout).toBe(first.stdout);
    const after = await counts(m);
    const sent = delta(before, after);
    // `status` itself is answered over the socket, not the mount: whatever arrived came from grep.
    expect(sent.open ?? 0).toBe(0);
    expect(sent.release ?? 0).toBe(0);
    expect(sent.read ?? 0).toBe(0);
    expect(sent.lookup ?? 0).toBe(0);
    // One OPEN for the whole mount: the first, answered ENOSYS (the kernel takes that as success).
    expect(after.open).toBe(1);
    expect(after.release ?? 0).toBe(0);
  });

  it('grants refused to come: no open of a cached file succeeds past --grant-ttl, and opens return by themselves with the grants', async () => {
    const m = await mountWith(['--grant-ttl', `${TTL_MS}ms`, '--sync-interval', '200ms', '--request-timeout', '1s']);
    const file = join(m.mountpoint, 'team_payments/runbooks/rb-3.md');
    for (let i = 0; i < 3; i++) expect((await run('cat', [file])).stdout).toBe('runbook 3 marker\n');
    // Grants (and only grants) stop: plans and file bytes keep passing, and the kernel holds the pages.
    const grants = (method: string, url: string) => method === 'GET' && url.startsWith('/v1/grants/');
    proxy.setRules([{ match: grants, mode: { kind: 'status', status: 503 } }]);
    const cut = Date.now();
    let lastOk = cut;
    await waitFor(
      async () => {
        const r = await run('cat', [file]);
        if (r.code === 0) lastOk = Date.now();
        return r.code !== 0 && Date.now() - cut > TTL_MS + 500;
      },
      15_000,
      POLL_MS,
    );
    // The last grant was asked for before the cut: nothing opened after its TTL.
    expect(lastOk - cut).toBeLessThan(TTL_MS);
    const refused = await run('cat', [file]);
    expect(refused.stderr).toMatch(/Input\/output error/);
    expect(refused.stdout).toBe('');
    // Metadata the kernel needs no grant for still answers; the file is still listed.
    expect((await run('ls', [join(m.mountpoint, 'team_payments/runbooks')])).stdout).toContain('rb-3.md');
    proxy.setRules([]);
    expect(await waitFor(async () => (await run('cat', [file])).stdout === 'runbook 3 marker\n', 10_000, POLL_MS)).toBe(true);
  });

  it('a stalled daemon cannot stretch a grant: cached files open from the kernel alone until the deadline, never after', async () => {
    const m = await mountWith(['--grant-ttl', `${TTL_MS}ms`, '--sync-interval', '200ms']);
    const file = join(m.mountpoint, 'team_payments/runbooks/rb-5.md');
    const asked = Date.now(); // the grant is asked for at the first open's lookup, not before
    for (let i = 0; i < 2; i++) expect((await run('cat', [file])).stdout).toBe('runbook 5 marker\n');
    const pid = m.pid ?? 0;
    // The kernel serves this open without the daemon: its entry and pages are held, and the grant is fresh.
    process.kill(pid, 'SIGSTOP');
    try {
      const stopped = Date.now();
      const withinGrant = await run('timeout', ['-s', 'KILL', '0.3', 'cat', file]);
      // (On a machine too busy to get here well inside the grant, only the second half is checked.)
      if (Date.now() - asked < TTL_MS / 2) expect(withinGrant.stdout).toBe('runbook 5 marker\n');
      // Past the deadline the entry is stale: the open needs a LOOKUP, which nobody answers.
      await new Promise((resolve) => setTimeout(resolve, TTL_MS + 200 - (Date.now() - stopped)));
      const late = await run('timeout', ['-s', 'KILL', '1', 'cat', file]);
      expect(late.code).not.toBe(0);
      expect(late.stdout).toBe('');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(await waitFor(async () => (await run('cat', [file])).stdout === 'runbook 5 marker\n', 10_000, POLL_MS)).toBe(true);
  });

  it('--grant-ttl 0 keeps asking on every open: the flag is off, and every cat is an OPEN', async () => {
    const m = await mountWith(['--grant-ttl', '0']);
    expect(m.stderr).toMatch(/kernel-opens off/);
    const file = join(m.mountpoint, 'account/DUTY.md');
    await run('cat', [file]);
    const before = await counts(m);
    for (let i = 0; i < 3; i++) expect((await run('cat', [file])).stdout).toBe('# Account\n');
    expect(delta(before, await counts(m)).open).toBe(3);
  });
});
