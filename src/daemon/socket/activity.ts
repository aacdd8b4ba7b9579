// `knowledgefs status`'s numbers, read from the daemon's own metrics
// registry, so the status and a Prometheus scrape can never disagree.

import { DAEMON_METRICS as D, histogramQuantile } from '../../core/metrics.js';
import type { DaemonActivity, FuseOperationStats } from '../../core/wire.js';
import type { MetricValueSample, PrometheusMetrics } from '../../metrics/prometheus-metrics.js';

function sum(samples: readonly MetricValueSample[], labels: Readonly<Record<string, string>> = {}, suffix = ''): number {
  let total = 0;
  for (const s of samples) {
    if (s.suffix !== suffix) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

function operations(counts: readonly MetricValueSample[], durations: readonly MetricValueSample[]): FuseOperationStats[] {
  const ops = new Map<string, { count: number; errors: Record<string, number> }>();
  for (const s of counts) {
    if (s.value === 0) continue;
    const op = String(s.labels['op']);
    const result = String(s.labels['result']);
    const entry = ops.get(op) ?? { count: 0, errors: {} };
    entry.count += s.value;
    if (result !== 'ok') entry.errors[result] = (entry.errors[result] ?? 0) + s.value;
    ops.set(op, entry);
  }
  return [...ops.entries()].map(([op, { count, errors }]) => {
    const mine = durations.filter((d) => d.labels['op'] === op);
    const observed = sum(mine, {}, '_count');
    const buckets = mine.filter((d) => d.suffix === '_bucket').map((d) => ({ le: d.labels['le'] === '+Inf' ? Infinity : Number(d.labels['le']), count: d.value }));
    const p99 = histogramQuantile(0.99, buckets);
    return {
      op,
      count,
      errors,
      meanMs: observed > 0 ? (sum(mine, {}, '_sum') / observed) * 1000 : null,
      p99Ms: p99 === null ? null : p99 * 1000,
    };
  });
}

export async function readActivity(metrics: PrometheusMetrics, startedAt: number, now = Date.now()): Promise<DaemonActivity> {
  // One collection for the whole answer: the numbers are of one moment, and the hooks run once.
  const [ops = [], durations = [], cache = [], cacheBytes = [], fetches = [], bytes = [], readAheads = [], grants = [], syncs = [], planAge = []] = await metrics.snapshot([
    D.fuseOps,
    D.fuseDuration,
    D.cacheLookups,
    D.cacheBytes,
    D.fetches,
    D.fetchedBytes,
    D.readAheads,
    D.grants,
    D.syncs,
    D.planAge,
  ]);
  const hits = sum(cache, { result: 'hit' });
  const misses = sum(cache, { result: 'miss' });
  return {
    uptimeSeconds: Math.round((now - startedAt) / 1000),
    operations: operations(ops, durations),
    eio: sum(ops, { result: 'EIO' }),
    cache: {
      hits,
      misses,
      hitRate: hits + misses > 0 ? hits / (hits + misses) : null,
      memoryBytes: sum(cacheBytes, { tier: 'memory' }),
      diskBytes: sum(cacheBytes, { tier: 'disk' }),
    },
    fetches: {
      files: sum(fetches, { kind: 'file' }),
      batches: sum(fetches, { kind: 'batch' }),
      errors: sum(fetches, { result: 'error' }),
      bytes: sum(bytes),
      readAheads: sum(readAheads),
    },
    grants: { asked: sum(grants, { result: 'asked' }), reused: sum(grants, { result: 'reused' }) },
    sync: { planAgeSeconds: sum(planAge), checks: sum(syncs, { result: 'ok' }), errors: sum(syncs, { result: 'error' }) },
  };
}
