// The sync loop and the prefetcher in-process against the fake control
// client: plans applied when they change, 304s cost nothing, errors keep the
// last tree and never end the loop, 401 empties, refreshNow is immediate and
// a stale reply never rolls the tree back; prefetch fetches everything with
// bounded concurrency, reports progress, and skips content that can't stay
// cached.

import { afterEach, describe, expect, it } from 'vitest';
import type { Plan } from '../src/core/session/plan.js';
import { Tree } from '../src/core/tree/tree.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import type { ControlClient, PlanRequest } from '../src/daemon/control-plane/control-client.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { Prefetcher } from '../src/daemon/content/prefetch.js';
import { SyncLoop } from '../src/daemon/sync/sync-loop.js';
import { FakeControlClient } from './helpers/fake-control-client.js';
import { waitFor } from './helpers/mount.js';

const loops: SyncLoop[] = [];
afterEach(async () => {
  for (const l of loops.splice(0)) await l.stop();
});

function loopWith(client: Pick<ControlClient, 'plan'>, intervalMs = 20) {
  let tree = Tree.empty();
  const logs: string[] = [];
  const revoked: string[] = [];
  const loop = new SyncLoop({
    client,
    threshold: 1000,
    intervalMs,
    currentVersion: () => tree.version,
    apply: (plan) => {
      tree = Tree.fromPlan(plan, tree);
    },
    revoked: (m) => {
      revoked.push(m);
      tree = Tree.empty();
    },
    log: (l) => logs.push(l),
  });
  loops.push(loop);
  return { loop, tree: () => tree, logs, revoked };
}

describe('SyncLoop', () => {
  it('applies changed plans, and only those', async () => {
    const client = new FakeControlClient();
    client.put('account/a.md', 'a');
    const s = loopWith(client);
    s.loop.start();
    expect(await waitFor(() => s.tree().fileCount === 1, 5000, 5)).toBe(true);
    const version = s.tree().version;
    expect(await waitFor(() => client.calls.plan > 5, 5000, 5)).toBe(true);
    expect(s.tree().version).toBe(version);
    client.put('account/b.md', 'b');
    expect(await waitFor(() => s.tree().fileCount === 2, 5000, 5)).toBe(true);
  });

  it('control plane down: keeps the last tree, logs once, backs off, recovers by itself', async () => {
    const client = new FakeControlClient();
    client.put('account/a.md', 'a');
    const s = loopWith(client);
    s.loop.start();
    expect(await waitFor(() => s.tree().fileCount === 1, 5000, 5)).toBe(true);
    client.fault = 'unavailable';
    expect(await waitFor(() => s.loop.errors >= 3, 10_000, 5)).toBe(true);
    expect(s.tree().fileCount).toBe(1);
    expect(s.logs.filter((l) => l.includes('keeping the last tree'))).toHaveLength(1);
    client.fault = 'none';
    client.put('account/b.md', 'b');
    expect(await waitFor(() => s.tree().fileCount === 2, 15_000, 10)).toBe(true);
    expect(s.logs.some((l) => l.includes('reachable again'))).toBe(true);
  });

  it('a revoked session (401) empties the tree', async () => {
    const client = new FakeControlClient();
    client.put('account/a.md', 'a');
    const s = loopWith(client);
    s.loop.start();
    expect(await waitFor(() => s.tree().fileCount === 1, 5000, 5)).toBe(true);
    client.fault = 'unauthorized';
    expect(await waitFor(() => s.revoked.length > 0, 5000, 5)).toBe(true);
    expect(s.tree().fileCount).toBe(0);
  });

  it('refreshNow applies at once, and a slower older reply never rolls the tree back', async () => {
    const client = new FakeControlClient();
    client.put('account/a.md', 'a');
    const old = client.currentPlan();
    let hold!: (p: Plan) => void;
    let first = true;
    const slow: Pick<ControlClient, 'plan'> = {
      plan: (req: PlanRequest) => {
        if (first) {
          first = false;
          return new Promise<Plan>((r) => (hold = r)); // the loop's first request hangs until we answer it
        }
        return client.plan(req);
      },
    };
    const s = loopWith(slow, 10_000);
    s.loop.start();
    client.put('account/b.md', 'b');
    await s.loop.refreshNow();
    expect(s.tree().fileCount).toBe(2);
    hold(old);
    await new Promise((r) => setTimeout(r, 50));
    expect(s.tree().fileCount).toBe(2);
  });
});

describe('Prefetcher', () => {
  it('fetches every file once with bounded concurrency, reports progress and a final line', async () => {
    const client = new FakeControlClient();
    for (let i = 0; i < 40; i++) client.put(`account/f${i}.md`, `file ${i}`);
    client.put('account/dup.md', 'file 0'); // same content as f0: fetched once
    let inFlight = 0;
    let maxInFlight = 0;
    const counting: ControlClient = Object.assign(Object.create(client) as FakeControlClient, {
      file: async (scope: string, path: string, max: number) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setTimeout(r, 2));
        try {
          return await client.file(scope, path, max);
        } finally {
          inFlight--;
        }
      },
    });
    const tree = Tree.fromPlan(client.currentPlan(), undefined);
    const fetcher = new ContentFetcher({ client: counting, cache: new ContentCache({ maxBytes: 1 << 20 }) });
    const logs: string[] = [];
    const p = new Prefetcher({ fetcher, concurrency: 4, cacheBytes: 1 << 20, hasDiskCache: false, log: (l) => logs.push(l), progressEveryMs: 0 });
    await p.schedule(tree);
    expect(client.calls.file).toBe(40);
    expect(maxInFlight).toBeLessThanOrEqual(4);
    expect(p.progress).toEqual({ done: 40, total: 40 });
    expect(logs.at(-1)).toMatch(/^prefetch: 40\/40 files \(.*\): done$/);
    for (const f of tree.files()) expect(fetcher.isCached(f.sha256)).toBe(true);
    // A second run has nothing to do.
    await p.schedule(tree);
    expect(client.calls.file).toBe(40);
  });

  it('skips content larger than the memory cache when there is no --cache-dir; counts failures without stopping', async () => {
    const client = new FakeControlClient();
    client.put('account/big.md', Buffer.alloc(2000));
    const logs: string[] = [];
    const fetcher = new ContentFetcher({ client, cache: new ContentCache({ maxBytes: 1000 }) });
    await new Prefetcher({ fetcher, cacheBytes: 1000, hasDiskCache: false, log: (l) => logs.push(l) }).schedule(Tree.fromPlan(client.currentPlan(), undefined));
    expect(client.calls.file).toBe(0);
    expect(logs[0]).toContain('prefetch: skipped');

    const broken = new FakeControlClient();
    broken.put('account/a.md', 'a');
    broken.put('account/b.md', 'b');
    broken.fileFault = 'flip';
    const logs2: string[] = [];
    await new Prefetcher({ fetcher: new ContentFetcher({ client: broken, cache: new ContentCache({ maxBytes: 1000 }) }), cacheBytes: 1000, hasDiskCache: false, log: (l) => logs2.push(l) }).schedule(Tree.fromPlan(broken.currentPlan(), undefined));
    expect(logs2.at(-1)).toContain('2 failed');
  });
});
