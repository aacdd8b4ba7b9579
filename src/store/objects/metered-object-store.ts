// An ObjectStore that records every request it passes on (count by
// operation and result, and duration) through the metrics recorder. Wraps
// the real store; nothing else changes.

import { CONTROL_PLANE_METRICS as M, type MetricsRecorder } from '../../core/metrics.js';
import type { ObjectStore } from './object-store.js';

type Op = 'get' | 'put' | 'head' | 'list';

export function meteredObjectStore(store: ObjectStore, metrics: MetricsRecorder): ObjectStore {
  const timed = async <T>(op: Op, run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    let result: 'ok' | 'error' = 'error';
    try {
      const value = await run();
      result = 'ok';
      return value;
    } finally {
      metrics.inc(M.objectStoreRequests, { op, result });
      metrics.observe(M.objectStoreDuration, { op }, (performance.now() - started) / 1000);
    }
  };
  return {
    description: store.description,
    get: (key, options) => timed('get', () => store.get(key, options)),
    put: (key, body, contentType) => timed('put', () => store.put(key, body, contentType)),
    has: (key) => timed('head', () => store.has(key)),
    // A listing is counted once, however many pages it takes.
    async *list(prefix) {
      const started = performance.now();
      let result: 'ok' | 'error' = 'error';
      try {
        yield* store.list(prefix);
        result = 'ok';
      } finally {
        metrics.inc(M.objectStoreRequests, { op: 'list', result });
        metrics.observe(M.objectStoreDuration, { op: 'list' }, (performance.now() - started) / 1000);
      }
    },
    close: () => store.close(),
  };
}
