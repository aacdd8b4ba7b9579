// `knowledgefs status` and `mount --metrics-listen` on a real mount driven by
// real shell tools: FUSE operations by kind with their errnos, cache hits,
// fetches and read-ahead, grants asked and reused, sync lag, and EIO when the
// control plane is gone. The status and a scrape of the daemon's metrics
// tell the same numbers; no label names a file, team, session or token.

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DaemonStatus } from '../src/core/wire.js';
import { DAEMON_METRICS as D } from '../src/core/metrics.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { allLabels, scrape, value } from './helpers/metrics-scrape.js';
import { BIN, bindingOf, fuseSuite, run, startMount, type MountHandle } from './helpers/mount.js';

const FILES: Record<string, string> = {
  'account/DUTY.md': '# Account\n',
  'teams/payments/DUTY.md': '# Payments\n',
  'teams/search/DUTY.md': '# Search\n',
};
for (let i = 0; i < 6; i++) FILES[`teams/payments/runbooks/rb-${i}.md`] = `runbook ${i} marker-${i}\n`;

let data = '';
let cp: TestControlPlane;
let m: MountHandle;
let token = '';
let sessionId = '';
let metricsUrl = '';

async function status(): Promise<DaemonStatus> {
  const r = await run(process.execPath, [BIN, 'status', '--socket', m.socketPath, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as DaemonStatus;
}

function op(s: DaemonStatus, name: string) {
  return s.activity?.operations.find((o) => o.op === name);
}

fuseSuite('knowledgefs status and mount --metrics-listen', () => {
  beforeAll(async () => {
    data = await makeDataDir({ teams: { payments: 'Payments', search: 'Search' }, users: { alice: { teams: ['payments', 'search'] } }, files: FILES });
    cp = await startControlPlane({ dataDir: data });
    ({ token, sessionId } = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' }));
    m = await startMount({
      serverUrl: cp.url,
      token,
      args: ['--prefetch-content', 'off', '--grant-ttl', '60s', '--sync-interval', '200ms', '--request-timeout', '1s', '--metrics-listen', '127.0.0.1:0'],
    });
    metricsUrl = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics) \(no token\)/.exec(m.stderr)?.[1] ?? '';
  });

  afterAll(async () => {
    await m?.stop();
    await cp?.close();
    if (data) await removeDataDir(data);
  });

  it('says where the metrics are, and serves them without a token', async () => {
    expect(metricsUrl, m.stderr).not.toBe('');
    const s = await scrape(metricsUrl);
    for (const spec of Object.values(D)) expect(s[spec.name]?.type, spec.name).toBe(spec.type);
    expect(value(s, D.planFiles.name)).toBe(9);
  });

  it('counts what ls, cat, grep and a refused write did', async () => {
    const before = await status();
    const opensBefore = op(before, 'open')?.count ?? 0;
    expect((await run('ls', ['-R', m.mountpoint])).code).toBe(0);
    expect((await run('cat', [join(m.mountpoint, 'team_payments/DUTY.md')])).stdout).toBe('# Payments\n');
    const grep = await run('grep', ['-r', 'marker-', join(m.mountpoint, 'team_payments/runbooks')]);
    expect(grep.stdout.trim().split('\n')).toHaveLength(6);
    expect((await run('cat', [join(m.mountpoint, 'team_payments/DUTY.md')])).code).toBe(0);
    expect((await run('cat', [join(m.mountpoint, 'team_payments/nope.md')])).code).not.toBe(0);
    const touch = await run('touch', [join(m.mountpoint, 'team_payments/DUTY.md')]);
    expect(touch.code).not.toBe(0);
    expect(touch.stderr).toMatch(/Read-only file system/);

    const after = await status();
    const a = after.activity;
    expect(a).toBeDefined();
    if (a === undefined) return;
    // 1 + 6 + 1 opens to read, and touch's open for writing, refused by the
    // daemon on libfuse 2; the native binding mounts `ro`, so the kernel
    // refuses that one without asking.
    const native = bindingOf(m) === 'native';
    expect((op(after, 'open')?.count ?? 0) - opensBefore).toBe(native ? 8 : 9);
    // The missing file: libfuse 2 asks getattr for it, the native binding a lookup.
    const missingOp = native ? 'lookup' : 'getattr';
    expect(op(after, missingOp)?.errors['ENOENT'] ?? 0).toBeGreaterThanOrEqual(1);
    expect(op(after, 'readdir')?.count ?? 0).toBeGreaterThanOrEqual(1);
    const refused = (op(after, 'write')?.errors['EROFS'] ?? 0) + (op(after, 'open')?.errors['EROFS'] ?? 0) + (op(after, 'access')?.errors['EROFS'] ?? 0);
    if (native) expect(refused).toBe(0);
    else expect(refused).toBeGreaterThanOrEqual(1);
    expect(op(after, 'open')?.meanMs).toBeGreaterThan(0);
    expect(op(after, 'open')?.p99Ms).toBeGreaterThan(0);
    // The second cat of DUTY.md was served from memory under a reused grant.
    expect(a.cache.hits).toBeGreaterThanOrEqual(1);
    expect(a.cache.hitRate).toBeGreaterThan(0);
    expect(a.grants.asked).toBeGreaterThanOrEqual(1);
    expect(a.grants.reused).toBeGreaterThanOrEqual(1);
    // grep over 6 uncached files in one directory reads ahead in a batch.
    expect(a.fetches.readAheads).toBeGreaterThanOrEqual(1);
    expect(a.fetches.batches).toBeGreaterThanOrEqual(1);
    expect(a.fetches.bytes).toBeGreaterThanOrEqual(6 * 'runbook 0 marker-0\n'.length);
    expect(a.cache.memoryBytes).toBeGreaterThan(0);
    expect(a.eio).toBe(0);
    // The sync loop's first check ends one --sync-interval (200 ms) after the mount came up, and a fast machine can
    // run everything above sooner: wait for it, bounded, rather than race it.
    await expect.poll(async () => (await status()).activity?.sync.checks ?? 0, { timeout: 5_000 }).toBeGreaterThanOrEqual(1);
    expect((await status()).activity?.sync.planAgeSeconds).toBeLessThan(5);
  });

  it('a scrape tells the same numbers as the status', async () => {
    const st = await status();
    const s = await scrape(metricsUrl);
    // Nothing touches the mount between the two reads (the status itself is socket traffic, not FUSE).
    expect(value(s, D.fuseOps.name, { op: 'open' })).toBe(op(st, 'open')?.count);
    expect(value(s, D.grants.name, { result: 'reused' })).toBe(st.activity?.grants.reused);
    expect(value(s, D.fetchedBytes.name)).toBe(st.activity?.fetches.bytes);
    const leaks = ['payments', 'search', 'runbooks', 'rb-', 'DUTY', sessionId, token, m.mountpoint];
    for (const { metric, label, value: v } of allLabels(s)) {
      for (const leak of leaks) expect(v.includes(leak), `${metric}{${label}="${v}"}`).toBe(false);
    }
  });

  it('prints one screen of text', async () => {
    const r = await run(process.execPath, [BIN, 'status', '--socket', m.socketPath]);
    expect(r.code, r.stderr).toBe(0);
    for (const heading of ['mount ', 'session ', 'sync ', 'cache ', 'fetches ', 'grants ', 'EIO ', 'operation']) {
      expect(r.stdout).toMatch(new RegExp(`^${heading}`, 'm'));
    }
    expect(r.stdout).toContain(m.mountpoint);
    expect(r.stdout).toMatch(/^open\s+\d+\s+\S+ms\s+\S+ms/m);
    expect(r.stdout.split('\n').length).toBeLessThan(30);
  });

  it('without a daemon at the socket: exit 4, and --json gives the error object', async () => {
    const r = await run(process.execPath, [BIN, 'status', '--socket', join(m.dir, 'no-such.sock'), '--json']);
    expect(r.code).toBe(4);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, error: { code: 'unavailable' } });
  });

  it('counts EIO and a growing sync lag once the control plane is gone', async () => {
    await cp.close();
    // search is loadable (creator member) but its bytes were never fetched, so cat needs the control plane.
    const cat = await run('cat', [join(m.mountpoint, 'team_search/DUTY.md')]);
    expect(cat.code).not.toBe(0);
    expect(cat.stderr).toMatch(/Input\/output error/);
    await new Promise((r) => setTimeout(r, 1500));
    const st = await status();
    expect(st.activity?.eio).toBeGreaterThanOrEqual(1);
    expect(op(st, 'open')?.errors['EIO']).toBeGreaterThanOrEqual(1);
    expect(st.activity?.sync.errors).toBeGreaterThanOrEqual(1);
    expect(st.activity?.sync.planAgeSeconds).toBeGreaterThan(1);
    expect(st.activity?.fetches.errors).toBeGreaterThanOrEqual(1);
  });
});
