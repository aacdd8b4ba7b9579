// 50 concurrent readers on one mount: `grep -r`, `cat` of every file and
// `find | xargs wc -c`, all at once, cold (nothing prefetched, so the first
// opens of every file coincide and must share one fetch each) and then warm.
// Every byte is checked, nothing may fail, and the daemon's memory stays
// within --cache-size plus a fixed allowance.

import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { fuseSuite, run, startMount, type MountHandle, type RunResult } from '../helpers/mount.js';
import { checkGrepOutput, filesSpec, makeCorpus, versionsOf, type CorpusFile } from '../faults/corpus.js';

const READERS = 50;
const CACHE_BYTES = 16 * 1024 * 1024;
/** Node, fuse-native and the tree cost a fixed amount on top of the content cache. */
const RSS_ALLOWANCE_BYTES = 200 * 1024 * 1024;

async function rssOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

fuseSuite('50 concurrent readers on one mount', () => {
  describe('cold then warm', () => {
    let dir: string;
    let cp: TestControlPlane;
    let mount: MountHandle;
    let corpus: CorpusFile[];
    let fetches = 0;

    beforeAll(async () => {
      corpus = makeCorpus(['account', 'team_payments'], 60, 400);
      dir = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: filesSpec(corpus) });
      cp = await startControlPlane({
        dataDir: dir,
        deps: {
          wrapPackStore: (store) => ({
            scopes: () => store.scopes(),
            snapshot: (s) => store.snapshot(s),
            read: (s, p) => {
              fetches++;
              return store.read(s, p);
            },
            get generation() {
              return store.generation;
            },
          }),
        },
      });
      const session = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      mount = await startMount({
        serverUrl: cp.url,
        token: session.token,
        args: ['--prefetch-content', 'off', '--cache-size', `${CACHE_BYTES}`, '--request-timeout', '10s'],
      });
    });

    afterAll(async () => {
      await mount?.stop();
      await cp?.close();
      if (dir) await removeDataDir(dir);
    });

    async function wave(label: string): Promise<void> {
      const versions = versionsOf(corpus);
      const t0 = Date.now();
      const jobs: Promise<{ kind: string; r: RunResult }>[] = [];
      for (let i = 0; i < READERS; i++) {
        if (i % 3 === 0) jobs.push(run('grep', ['-r', '-H', '', '.'], { cwd: mount.mountpoint, timeoutMs: 120_000 }).then((r) => ({ kind: 'grep', r })));
        else if (i % 3 === 1) jobs.push(run('sh', ['-c', 'find . -type f | sort | xargs cat | sha256sum'], { cwd: mount.mountpoint, timeoutMs: 120_000 }).then((r) => ({ kind: 'cat-all', r })));
        else jobs.push(run('sh', ['-c', 'find . -type f -print0 | xargs -0 wc -c | tail -1'], { cwd: mount.mountpoint, timeoutMs: 120_000 }).then((r) => ({ kind: 'wc', r })));
      }
      const results = await Promise.all(jobs);
      const wall = Date.now() - t0;
      const { createHash } = await import('node:crypto');
      const sorted = [...corpus].sort((a, b) => (`./${a.mountPath}` < `./${b.mountPath}` ? -1 : 1));
      const allSha = createHash('sha256').update(sorted.map((f) => f.content).join('')).digest('hex');
      const total = corpus.reduce((n, f) => n + Buffer.byteLength(f.content), 0);
      for (const { kind, r } of results) {
        expect(r.timedOut, `${label} ${kind} hung`).toBe(false);
        expect(r.code, `${label} ${kind}: ${r.stderr}`).toBe(0);
        expect(r.stderr, `${label} ${kind}`).toBe('');
        if (kind === 'grep') {
          const check = checkGrepOutput(r.stdout, versions);
          expect(check.problems).toEqual([]);
          expect(check.complete.length).toBe(corpus.length);
        } else if (kind === 'cat-all') {
          expect(r.stdout.split(' ')[0], `${label}: concatenated bytes differ`).toBe(allSha);
        } else {
          expect(r.stdout.trim()).toBe(`${total} total`);
        }
      }
      const mem = await rssOf(mount.pid as number);
      process.stderr.write(
        `readers ${label}: ${READERS} processes over ${corpus.length} files (${(total / 1024).toFixed(0)} KiB) in ${wall} ms, slowest ${Math.max(...results.map((x) => x.r.ms))} ms; ` +
          `store reads so far ${fetches}; daemon RSS ${(mem.rss / 2 ** 20).toFixed(0)} MiB (peak ${(mem.hwm / 2 ** 20).toFixed(0)} MiB)\n`,
      );
      expect(mem.hwm).toBeLessThan(CACHE_BYTES + RSS_ALLOWANCE_BYTES);
    }

    it('cold: 50 readers at once, every byte exact, one fetch per file', async () => {
      await wave('cold');
      // Concurrent opens of one file share one fetch: at most one store read per file (plus a few retries).
      expect(fetches).toBeLessThanOrEqual(corpus.length + 5);
    }, 240_000);

    it('warm: 50 readers again from the cache, no new fetches', async () => {
      const before = fetches;
      await wave('warm');
      expect(fetches).toBe(before);
      expect(mount.child.exitCode).toBeNull();
    }, 240_000);
  });
});
