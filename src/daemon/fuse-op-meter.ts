// Counts and times FUSE operations for metrics and `knowledgefs status`,
// independently of the binding: `wrapOps` wraps a table of callback-style
// operations (fuse-native's), and any other binding calls `done` itself
// with the code it answers (0 or more: success; negative: -errno).
//
// Time runs from the operation reaching the daemon to its answer, so an open
// that waits for the control plane shows that wait.

import { performance } from 'node:perf_hooks';
import { DAEMON_METRICS, fuseResultOf, type FuseOp, type MetricsRecorder } from '../core/metrics.js';
import { EACCES, EIO, ENOENT, EROFS, ESTALE } from './errno.js';

const ERRNO = { ENOENT, EIO, EROFS, EACCES, ESTALE };

export class FuseOpMeter {
  constructor(private readonly metrics: MetricsRecorder) {}

  /** One answered operation; `started` is `performance.now()` when it arrived. */
  done(op: FuseOp, started: number, code: number): void {
    this.metrics.inc(DAEMON_METRICS.fuseOps, { op, result: fuseResultOf(code, ERRNO) });
    this.metrics.observe(DAEMON_METRICS.fuseDuration, { op }, (performance.now() - started) / 1000);
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
