// A real mount given two real control planes (`--server A,B`, one session
// state behind both), each behind a fault proxy: while A answers something
// that cannot be used (garbage, an HTML page with 200, an invalid plan,
// flipped file bytes, 401), cat, grep -r and the read tool get every file
// whole from B, with no EIO and no empty mount. A definite refusal from A is
// the answer and is never asked of B: a 404 stays ENOENT, and a team
// session asking for another team gets the guidance (403).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { SessionState } from '../src/server/state/session-state.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { pathStartsWith, startFaultProxy, type FaultProxy, type ProxyRule } from './helpers/fault-proxy.js';
import { BIN, fuseSuite, run, startMount, type MountHandle } from './helpers/mount.js';

const FILES: Record<string, string> = {
  'account/DUTY.md': '# Account\nShared policies. ACCOUNT-MARKER\n',
  'teams/payments/DUTY.md': '# Payments\nCards and payouts. PAYMENTS-MARKER\n',
  'teams/payments/runbooks/checkout-5xx.md': 'restart the checkout pods CHECKOUT-MARKER\n',
  'teams/search/DUTY.md': '# Search\nOwns indexing. SEARCH-MARKER\n',
};
/** Mount paths (scope directories) → content. */
const MOUNTED = Object.fromEntries(Object.entries(FILES).map(([p, c]) => [p.replace(/^teams\//, 'team_'), c]));
/** Every open asks the control plane: no prefetch, no cache, no grant reuse. */
const EVERY_OPEN_ASKS = ['--prefetch-content', 'off', '--cache-size', '0', '--grant-ttl', '0', '--sync-interval', '200ms'];
const HTML = '<!doctype html><html><body>Sign in to the corporate proxy</body></html>';

let data = '';
let a: TestControlPlane;
let b: TestControlPlane;
let proxyA: FaultProxy;
let proxyB: FaultProxy;
const mounts: MountHandle[] = [];

beforeAll(async () => {
  data = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search' },
    users: { alice: { teams: ['payments', 'search'] } },
    files: FILES,
  });
  // Two control planes on one session state, as replicas on one PostgreSQL are.
  let shared: SessionState | undefined;
  a = await startControlPlane({ dataDir: data, deps: { wrapSessions: (s) => (shared = s) } });
  b = await startControlPlane({ dataDir: data, adminToken: a.adminToken, deps: { wrapSessions: (s) => shared ?? s } });
  proxyA = await startFaultProxy(a.url);
  proxyB = await startFaultProxy(b.url);
});

afterAll(async () => {
  for (const m of mounts) await m.stop().catch(() => undefined);
  await proxyA?.close();
  await proxyB?.close();
  await b?.close();
  await a?.close().catch(() => undefined);
  if (data) await removeDataDir(data);
});

async function mountThroughProxies(input: { kind: 'team' | 'personal'; creator: string; team?: string }): Promise<MountHandle> {
  const session = await a.createSession(input);
  const m = await startMount({ serverUrl: `${proxyA.url},${proxyB.url}`, token: session.token, args: EVERY_OPEN_ASKS });
  mounts.push(m);
  return m;
}

const readTool = (m: MountHandle, path: string) => run(process.execPath, [BIN, 'read', `knowledge/${path}`, '--socket', m.socketPath], { cwd: m.dir, timeoutMs: 30_000 });

const ALL = undefined;
const CASES: readonly (readonly [string, ProxyRule])[] = [
  ['garbage for every request', { mode: { kind: 'garbage' }, match: ALL }],
  ['an HTML page with 200 for every request', { mode: { kind: 'status', status: 200, body: HTML }, match: ALL }],
  ['401 for every request', { mode: { kind: 'status', status: 401, body: JSON.stringify({ error: { code: 'unauthorized', message: 'unknown token' } }) }, match: ALL }],
  ['an invalid plan', { mode: { kind: 'status', status: 200, body: JSON.stringify({ sessionId: 'ses_x', scopes: 'all of them' }) }, match: pathStartsWith('/v1/plan') }],
  ['flipped file bytes (length and sha256 header kept)', { mode: { kind: 'flip' }, match: pathStartsWith('/v1/files/') }],
  ['garbage for file bodies', { mode: { kind: 'garbage' }, match: pathStartsWith('/v1/files/') }],
];

fuseSuite('replicas answering what cannot be used, under a real mount', () => {
  it.each(CASES)('replica A answering %s: cat, grep -r and the read tool get every file from B, no EIO', async (_name, rule) => {
    proxyA.setRules([rule]);
    proxyA.resetCounts();
    proxyB.resetCounts();
    const m = await mountThroughProxies({ kind: 'personal', creator: 'alice' });
    try {
      for (const [path, content] of Object.entries(MOUNTED)) {
        const cat = await run('cat', [path], { cwd: m.mountpoint });
        expect(cat.stderr, path).toBe('');
        expect(cat.code, path).toBe(0);
        expect(cat.stdout).toBe(content);
      }
      const grep = await run('grep', ['-r', '-H', 'MARKER', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
      expect(grep.stderr).toBe('');
      expect(grep.code).toBe(0);
      expect(grep.stdout.trim().split('\n')).toHaveLength(Object.keys(MOUNTED).length);
      const read = await readTool(m, 'team_search/DUTY.md');
      expect(read.stderr).toBe('');
      expect(read.stdout).toBe(MOUNTED['team_search/DUTY.md']);
      // The fault was met (A was asked and answered it), and B answered instead.
      expect(proxyA.count((r) => r.mode !== 'pass')).toBeGreaterThanOrEqual(1);
      expect(proxyB.count((r) => r.url.startsWith('/v1/files/'))).toBeGreaterThanOrEqual(1);
      expect(m.stderr).not.toMatch(/integrity:/);
    } finally {
      await m.stop();
      proxyA.setRules([]);
    }
  }, 90_000);

  it('a 404 (file gone) and a 403 (team session asking for another team) from A are the answer: ENOENT and the guidance, never asked of B', async () => {
    const gone = JSON.stringify({ error: { code: 'not_found', message: 'no such file: team_payments/runbooks/checkout-5xx.md' } });
    proxyA.setRules([{ mode: { kind: 'status', status: 404, body: gone }, match: pathStartsWith('/v1/files/team_payments/runbooks/') }]);
    const m = await mountThroughProxies({ kind: 'team', creator: 'alice', team: 'payments' });
    try {
      proxyA.resetCounts();
      proxyB.resetCounts();
      const cat = await run('cat', ['team_payments/runbooks/checkout-5xx.md'], { cwd: m.mountpoint });
      expect(cat.code).not.toBe(0);
      expect(cat.stderr).toMatch(/No such file or directory/);
      expect(cat.stderr).not.toMatch(/Input\/output error/);
      expect(proxyA.count((r) => r.mode === 'status')).toBe(1);

      // The control plane itself refuses (403) with the guidance text.
      const read = await readTool(m, 'team_search/DUTY.md');
      expect(read.code).toBe(3);
      expect(read.stderr).toMatch(/belongs to team "payments" and cannot load team "search"/);
      expect(read.stderr).toMatch(/ask an admin to share/);
      expect(proxyA.count((r) => r.method === 'POST' && r.url === '/v1/read')).toBe(1);

      // Neither refusal was asked of B, and the mount still uses A.
      expect(proxyB.requests.filter((r) => !r.url.startsWith('/v1/plan'))).toEqual([]);
      expect((await readFile(join(m.mountpoint, 'team_payments/DUTY.md'), 'utf8'))).toBe(MOUNTED['team_payments/DUTY.md']);
      expect(proxyB.count((r) => r.url.startsWith('/v1/files/'))).toBe(0);
    } finally {
      await m.stop();
      proxyA.setRules([]);
    }
  }, 90_000);
});
