// Counts and times FUSE operations for metrics and `knowledgefs status`,
// independently of the binding: `wrapOps` wraps a table of callback-style
// operations (fuse-native's), and any other binding calls `done` itself
// with the code it answers (0 or more: success; negative: -errno).
//
// Time runs from the operation reaching the daemon to its answer, so an open
// that waits for the control plane shows that wait.
//
// This is the hottest path of the daemon (a warm `grep -r` is a few µs of
// our code per operation), so `done` only bumps numbers in typed arrays;
// `exportTo` hands the totals to the metrics registry before each scrape.

import { performance } from 'node:perf_hooks';
import { DAEMON_METRICS, FUSE_OPS, FUSE_RESULTS, fuseResultOf, LATENCY_BUCKETS, type FuseOp } from '../../core/metrics.js';
import type { PrometheusMetrics } from '../../metrics/prometheus-metrics.js';
import { EACCES, EIO, ENOENT, EROFS, ESTALE } from './errno.js';

const ERRNO = { ENOENT, EIO, EROFS, EACCES, ESTALE };
const OP_INDEX = new Map<string, number>(FUSE_OPS.map((op, i) => [op, i]));
const RESULT_INDEX = new Map<string, number>(FUSE_RESULTS.map((r, i) => [r, i]));
const BUCKETS = LATENCY_BUCKETS.length + 1; // the last one is +Inf

export class FuseOpMeter {
  private readonly counts = new Float64Array(FUSE_OPS.length * FUSE_RESULTS.length);
  private readonly buckets = new Float64Array(FUSE_OPS.length * BUCKETS);
  private readonly sums = new Float64Array(FUSE_OPS.length);

  /** One answered operation; `started` is `performance.now()` when it arrived. */
  done(op: FuseOp, started: number, code: number): void {
    const seconds = (performance.now() - started) / 1000;
    const o = OP_INDEX.get(op) as number;
    this.counts[o * FUSE_RESULTS.length + (code >= 0 ? 0 : (RESULT_INDEX.get(fuseResultOf(code, ERRNO)) as number))]! += 1;
    let b = 0;
    while (b < LATENCY_BUCKETS.length && seconds > (LATENCY_BUCKETS[b] as number)) b++;
    this.buckets[o * BUCKETS + b]! += 1;
    this.sums[o]! += seconds;
  }

  /**
   * Hands the totals so far to `metrics` (call it from `beforeScrape`).
   * `answeredByBinding`: successful operations the binding answered without
   * reaching the daemon (the native fast path), counted in the fastest bucket.
   */
  exportTo(metrics: Pick<PrometheusMetrics, 'setTotal' | 'setHistogram'>, answeredByBinding: Partial<Record<FuseOp, number>> = {}): void {
    FUSE_OPS.forEach((op, o) => {
      const extra = answeredByBinding[op] ?? 0;
      FUSE_RESULTS.forEach((result, r) => {
        metrics.setTotal(DAEMON_METRICS.fuseOps, { op, result }, (this.counts[o * FUSE_RESULTS.length + r] as number) + (r === 0 ? extra : 0));
      });
      const counts = Array.from(this.buckets.subarray(o * BUCKETS, (o + 1) * BUCKETS));
      counts[0] = (counts[0] as number) + extra;
      if (counts.some((n) => n > 0)) metrics.setHistogram(DAEMON_METRICS.fuseDuration, { op }, { counts, sum: this.sums[o] as number });
    });
  }

  /**
   * Wraps each operation of `ops` named in `kinds` so its callback (the last
   * argument) records the answer. Other entries are left as they are.
   */
  wrapOps<T extends Record<string, unknown>>(ops: T, kinds: Readonly<Record<string, FuseOp>>): T {
    const wrapped: Record<string, unknown> = { ...ops };
    for (const [name, fn] of Object.entries(ops)) {
      const op = kinds[name];
      if (op === undefined || typeof fn !== 'function') continue;
      wrapped[name] = (...args: unknown[]) => {
        const started = performance.now();
        const cb = args[args.length - 1];
        if (typeof cb !== 'function') return (fn as (...a: unknown[]) => unknown)(...args);
        args[args.length - 1] = (code: number, ...rest: unknown[]) => {
          this.done(op, started, code);
          (cb as (...a: unknown[]) => void)(code, ...rest);
        };
        return (fn as (...a: unknown[]) => unknown)(...args);
      };
    }
    return wrapped as T;
  }
}
