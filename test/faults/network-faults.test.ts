// A real mount whose control plane sits behind the fault proxy. For each way
// a network or a sick server fails — delay past the timeout, hang, reset,
// refused connections, truncated bodies, flipped bytes, 5xx, garbage — on
// file bodies, on grants and on plans:
//   - `cat` of an uncached file fails with EIO (never empty, never partial,
//     never wrong bytes) within the request timeout (generous bound);
//   - metadata (`ls`, `stat`) keeps working: no network on metadata ops;
//   - a corrupted plan never becomes the tree (no phantom names);
//   - once the proxy passes again, the same daemon serves exact bytes and
//     picks up changes made meanwhile, without a remount.
// The mount runs with no memory cache and a 0 grant TTL so every open
// reaches the (faulty) network.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { pathStartsWith, startFaultProxy, type FaultProxy, type ProxyMode } from '../helpers/fault-proxy.js';
import { fuseSuite, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { checkGrepOutput, fileContent, filesSpec, makeCorpus, versionsOf, type CorpusFile } from './corpus.js';

const TIMEOUT_MS = 1000;
/** "No hang": the request timeout plus generous slack for a loaded machine. */
const NO_HANG_MS = 12_000;

const BODY_FAULTS: readonly [string, ProxyMode][] = [
  ['delay past the timeout', { kind: 'delay', ms: 4000 }],
  ['hang', { kind: 'hang' }],
  ['reset', { kind: 'reset' }],
  ['truncated body', { kind: 'truncate' }],
  ['flipped byte', { kind: 'flip' }],
  ['HTTP 500', { kind: 'status', status: 500 }],
  ['HTTP 503', { kind: 'status', status: 503 }],
  ['garbage 200', { kind: 'garbage' }],
];

fuseSuite('mount behind a faulty network', () => {
  let dir: string;
  let cp: TestControlPlane;
  let proxy: FaultProxy;
  let mount: MountHandle;
  let corpus: CorpusFile[];
  let token: string;
  /** Files the plan cases rewrote: their current content. */
  const edited = new Map<string, string>();
  const currentCorpus = (): CorpusFile[] => corpus.map((c) => ({ ...c, content: edited.get(c.mountPath) ?? c.content }));
  let next = 0;
  /** A payments file no test has opened yet. */
  const fresh = (): CorpusFile => {
    const f = corpus.filter((c) => c.mountPath.startsWith('team_payments/docs/'))[next++];
    if (f === undefined) throw new Error('corpus too small for the number of cases');
    return f;
  };
  const inMount = (f: CorpusFile | string) => join(mount.mountpoint, typeof f === 'string' ? f : f.mountPath);

  beforeAll(async () => {
    corpus = makeCorpus(['account', 'team_payments'], 40, 600);
    dir = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: filesSpec(corpus) });
    cp = await startControlPlane({ dataDir: dir });
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    token = session.token;
    proxy = await startFaultProxy(cp.url);
    mount = await startMount({
      serverUrl: proxy.url,
      token: session.token,
      args: ['--prefetch-content', 'off', '--cache-size', '0', '--grant-ttl', '0', '--request-timeout', `${TIMEOUT_MS}ms`, '--sync-interval', '200ms'],
    });
  });

  afterAll(async () => {
    await mount?.stop();
    await proxy?.close();
    await cp?.close();
    if (dir) await removeDataDir(dir);
  });

  async function expectEio(f: CorpusFile, label: string): Promise<void> {
    const r = await run('cat', [inMount(f)], { timeoutMs: 30_000 });
    expect(r.timedOut, `${label}: cat hung`).toBe(false);
    expect(r.ms, `${label}: cat took ${r.ms} ms`).toBeLessThan(NO_HANG_MS);
    expect(r.code, `${label}: cat succeeded with ${r.stdout.length} chars`).not.toBe(0);
    expect(r.stdout, `${label}: partial or wrong content reached the reader`).toBe('');
    expect(r.stderr, label).toMatch(/Input\/output error/);
  }

  async function expectExact(f: CorpusFile, label: string, content = f.content): Promise<void> {
    const r = await run('cat', [inMount(f)], { timeoutMs: 30_000 });
    expect(r.stderr, label).toBe('');
    expect(r.stdout === content, `${label}: bytes differ`).toBe(true);
  }

  async function metadataStillWorks(f: CorpusFile): Promise<void> {
    const ls = await run('ls', [join(mount.mountpoint, 'team_payments', 'docs')], { timeoutMs: 30_000 });
    expect(ls.code).toBe(0);
    expect(ls.stdout.split('\n')).toContain(f.mountPath.split('/').pop());
    const st = await run('stat', ['-c', '%s', inMount(f)], { timeoutMs: 30_000 });
    expect(st.stdout.trim()).toBe(String(Buffer.byteLength(f.content)));
  }

  it('sanity: through a passing proxy every byte arrives', async () => {
    await expectExact(corpus[0] as CorpusFile, 'account/DUTY.md');
    expect(proxy.count((r) => r.url.startsWith('/v1/files/'))).toBeGreaterThan(0);
  });

  for (const [label, mode] of BODY_FAULTS) {
    it(`file bodies, ${label}: EIO within the timeout, nothing partial; then exact bytes again`, async () => {
      const f = fresh();
      proxy.setRules([{ mode, match: pathStartsWith('/v1/files/') }]);
      try {
        await expectEio(f, label);
        await metadataStillWorks(f);
      } finally {
        proxy.setMode({ kind: 'pass' });
        proxy.dropConnections();
      }
      await expectExact(f, `${label}, after recovery`);
      expect(mount.child.exitCode).toBeNull();
    });
  }

  for (const [label, mode] of BODY_FAULTS) {
    it(`grants, ${label}: EIO within the timeout; then exact bytes again`, async () => {
      const f = fresh();
      proxy.setRules([{ mode, match: pathStartsWith('/v1/grants/') }]);
      try {
        await expectEio(f, `grant ${label}`);
      } finally {
        proxy.setMode({ kind: 'pass' });
        proxy.dropConnections();
      }
      // A failed grant is not a denial: the file stays in the tree.
      await metadataStillWorks(f);
      await expectExact(f, `grant ${label}, after recovery`);
    });
  }

  it('a slow network within the timeout still delivers exact bytes', async () => {
    const f = fresh();
    proxy.setMode({ kind: 'delay', ms: 150 });
    try {
      await expectExact(f, 'delay 150 ms');
    } finally {
      proxy.setMode({ kind: 'pass' });
    }
  });

  it('connections refused: EIO, ls still answers from the tree, recovery without remount', async () => {
    const f = fresh();
    proxy.setMode({ kind: 'refuse' });
    try {
      await expectEio(f, 'refused');
      await metadataStillWorks(f);
    } finally {
      proxy.setMode({ kind: 'pass' });
    }
    await expectExact(f, 'after refusal');
  });

  for (const [label, mode] of [...BODY_FAULTS, ['a flipped file name', { kind: 'flip', find: 'f030.md' }] as [string, ProxyMode]]) {
    it(`plans, ${label}: the tree is never corrupted; the change arrives once plans pass again`, async () => {
      const f = fresh();
      const v2 = fileContent(f.mountPath, 2, 3 + next);
      proxy.setRules([{ mode, match: pathStartsWith('/v1/plan') }]);
      try {
        proxy.dropConnections(); // end the current long-poll so the next one meets the fault
        await writeFile(join(dir, f.dataPath), v2);
        edited.set(f.mountPath, v2);
        await cp.rescan();
        // Several sync rounds meet the fault; the listing must stay exactly the server's names.
        for (let i = 0; i < 4; i++) {
          for (const scope of ['account', 'team_payments']) {
            const real = new Set(corpus.filter((c) => c.mountPath.startsWith(`${scope}/docs/`)).map((c) => c.mountPath.split('/').pop()));
            const names = await readdirChild(join(mount.mountpoint, scope, 'docs'));
            expect(names.filter((n) => !real.has(n)), `${label}: names the server never sent`).toEqual([]);
            expect(names.length).toBe(real.size);
          }
          await new Promise((r) => setTimeout(r, 250));
        }
        expect(proxy.count((r) => r.url.startsWith('/v1/plan') && r.mode === mode.kind), `${label}: no plan request met the fault`).toBeGreaterThan(0);
        // Old bytes are gone from the server; the tree still shows the old version: EIO or old bytes, never a mix.
        const r = await run('cat', [inMount(f)], { timeoutMs: 30_000 });
        expect(r.ms).toBeLessThan(NO_HANG_MS);
        expect([f.content, '']).toContain(r.stdout);
      } finally {
        proxy.setMode({ kind: 'pass' });
        proxy.dropConnections();
      }
      const seen = await waitFor(async () => (await run('cat', [inMount(f)])).stdout === v2, 15_000);
      expect(seen, `${label}: new version did not arrive after the fault ended`).toBe(true);
      const st = await run('stat', ['-c', '%s', inMount(f)]);
      expect(st.stdout.trim()).toBe(String(Buffer.byteLength(v2)));
      expect(mount.child.exitCode).toBeNull();
    });
  }

  // Prefetch goes through POST /v1/batch: a damaged batch must never put bad bytes in the cache.
  const BATCH_FAULTS: readonly [string, ProxyMode][] = [
    ['flipped byte in the stream', { kind: 'flip' }],
    ['flipped byte inside file content', { kind: 'flip', find: ' line 7 ' }],
    ['truncated stream', { kind: 'truncate' }],
    ['reset', { kind: 'reset' }],
    ['HTTP 500', { kind: 'status', status: 500 }],
    ['garbage 200', { kind: 'garbage' }],
  ];
  for (const [label, mode] of BATCH_FAULTS) {
    it(`prefetch batches, ${label}: nothing bad is cached; every file reads exact`, async () => {
      proxy.setRules([{ mode, match: pathStartsWith('/v1/batch') }]);
      proxy.resetCounts();
      const m = await startMount({ serverUrl: proxy.url, token, args: ['--grant-ttl', '5s', '--request-timeout', `${TIMEOUT_MS}ms`] });
      try {
        expect(await waitFor(() => /prefetch: .*done/.test(m.stderr), 30_000), m.stderr).toBe(true);
        expect(proxy.count((r) => r.url.startsWith('/v1/batch') && r.mode === mode.kind), `${label}: no batch met the fault`).toBeGreaterThan(0);
        // Files now come from the cache (or a clean per-file fetch); none may differ from the corpus.
        proxy.setMode({ kind: 'pass' });
        const r = await run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
        expect(r.stderr).toBe('');
        const check = checkGrepOutput(r.stdout, versionsOf(currentCorpus()));
        expect(check.problems).toEqual([]);
        expect(check.complete.length).toBe(corpus.length);
        expect(m.stderr).not.toMatch(/unexpected error|TypeError|RangeError|Unhandled/);
      } finally {
        proxy.setMode({ kind: 'pass' });
        await m.stop();
      }
    });
  }

  it('the daemon logged every fault as a clean error, never crashed', () => {
    expect(mount.child.exitCode).toBeNull();
    expect(mount.stderr).not.toMatch(/unexpected error|TypeError|RangeError|Unhandled/);
  });
});

/** `ls -1a` in a child process (the test process never touches the mount itself). */
async function readdirChild(path: string): Promise<string[]> {
  const r = await run('ls', ['-1', path], { timeoutMs: 30_000 });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.split('\n').filter((n) => n !== '');
}
