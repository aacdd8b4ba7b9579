// The metered object store: every request it passes on is counted once by
// operation and result and timed, its answers and errors are the wrapped
// store's own, and a listing is one request however many keys it yields.

import { describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS as M, type MetricsRecorder } from '../src/core/metrics.js';
import { meteredObjectStore } from '../src/store/objects/metered-object-store.js';
import type { ObjectStore } from '../src/store/objects/object-store.js';

interface Recorded {
  readonly kind: 'inc' | 'observe';
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number | undefined;
}

function recorder(): { metrics: MetricsRecorder; seen: Recorded[] } {
  const seen: Recorded[] = [];
  const metrics: MetricsRecorder = {
    inc: (spec, labels, by) => seen.push({ kind: 'inc', name: spec.name, labels: { ...labels }, value: by }),
    add: () => undefined,
    set: () => undefined,
    observe: (spec, labels, value) => seen.push({ kind: 'observe', name: spec.name, labels: { ...labels }, value }),
  };
  return { metrics, seen };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fakeStore(fail: boolean): ObjectStore & { closed: number; puts: unknown[][] } {
  const boom = () => Promise.reject(new Error('bucket down'));
  const store = {
    description: 's3://bkt/pfx',
    closed: 0,
    puts: [] as unknown[][],
    get: async (key: string) => (fail ? boom() : (await sleep(20), { body: Buffer.from(key), etag: '"e"' })),
    put: async (key: string, body: Buffer, contentType?: string) => {
      if (fail) return boom();
      store.puts.push([key, body.toString(), contentType]);
    },
    has: async (key: string) => (fail ? boom() : key === 'there'),
    async *list(prefix: string) {
      yield `${prefix}a`;
      if (fail) throw new Error('listing broke');
      yield `${prefix}b`;
    },
    close: async () => {
      store.closed++;
    },
  };
  return store as unknown as ObjectStore & { closed: number; puts: unknown[][] };
}

const counts = (seen: Recorded[]): Array<Record<string, string | number | undefined>> =>
  seen.filter((r) => r.kind === 'inc').map((r) => ({ ...r.labels, name: r.name, by: r.value }));
const timings = (seen: Recorded[]) => seen.filter((r) => r.kind === 'observe');

describe('meteredObjectStore', () => {
  it('passes answers through and counts each request as ok, with its duration in seconds', async () => {
    const { metrics, seen } = recorder();
    const inner = fakeStore(false);
    const store = meteredObjectStore(inner, metrics);
    expect(store.description).toBe('s3://bkt/pfx');
    const t0 = performance.now();
    expect(await store.get('k1', { maxBytes: 1024 })).toMatchObject({ body: Buffer.from('k1') });
    const getTook = (performance.now() - t0) / 1000;
    await store.put('k2', Buffer.from('v'), 'text/plain');
    expect(inner.puts).toEqual([['k2', 'v', 'text/plain']]);
    expect(await store.has('there')).toBe(true);
    expect(await store.has('gone')).toBe(false);
    const keys: string[] = [];
    for await (const k of store.list('p/')) keys.push(k);
    expect(keys).toEqual(['p/a', 'p/b']);
    await store.close();
    expect(inner.closed).toBe(1);
    expect(counts(seen)).toEqual([
      { name: M.objectStoreRequests.name, op: 'get', result: 'ok', by: undefined },
      { name: M.objectStoreRequests.name, op: 'put', result: 'ok', by: undefined },
      { name: M.objectStoreRequests.name, op: 'head', result: 'ok', by: undefined },
      { name: M.objectStoreRequests.name, op: 'head', result: 'ok', by: undefined },
      { name: M.objectStoreRequests.name, op: 'list', result: 'ok', by: undefined },
    ]);
    const times = timings(seen);
    expect(times.map((t) => [t.name, t.labels.op])).toEqual(
      ['get', 'put', 'head', 'head', 'list'].map((op) => [M.objectStoreDuration.name, op]),
    );
    // The get waited 20 ms: seconds, not milliseconds, and measured from the start of the call.
    expect(times[0]?.value).toBeGreaterThanOrEqual(0.015);
    expect(times[0]?.value).toBeLessThanOrEqual(getTook);
    for (const t of times) expect(t.value).toBeGreaterThanOrEqual(0);
  });

  it('rethrows the store\'s own error and counts the request as an error', async () => {
    const { metrics, seen } = recorder();
    const store = meteredObjectStore(fakeStore(true), metrics);
    await expect(store.get('k', { maxBytes: 1024 })).rejects.toThrow('bucket down');
    await expect(store.put('k', Buffer.from('v'))).rejects.toThrow('bucket down');
    await expect(store.has('k')).rejects.toThrow('bucket down');
    const keys: string[] = [];
    await expect(
      (async () => {
        for await (const k of store.list('')) keys.push(k);
      })(),
    ).rejects.toThrow('listing broke');
    expect(keys).toEqual(['a']);
    expect(counts(seen).map((c) => [c.op, c.result])).toEqual([
      ['get', 'error'],
      ['put', 'error'],
      ['head', 'error'],
      ['list', 'error'],
    ]);
    expect(timings(seen)).toHaveLength(4);
  });

  it('a listing is timed from its start to its end, across its pages', async () => {
    const { metrics, seen } = recorder();
    const slow: ObjectStore = {
      ...fakeStore(false),
      async *list() {
        yield 'a';
        await sleep(30);
        yield 'b';
      },
    };
    const store = meteredObjectStore(slow, metrics);
    const t0 = performance.now();
    for await (const _ of store.list('')) void _;
    const took = (performance.now() - t0) / 1000;
    expect(timings(seen)[0]?.value).toBeGreaterThanOrEqual(0.025);
    expect(timings(seen)[0]?.value).toBeLessThanOrEqual(took);
  });
});
