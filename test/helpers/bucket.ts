// Object-storage helpers for tests: publish a data directory into the test
// S3 server, start a control plane serving it, and wrap the object store to
// count requests or inject faults (the real store underneath, as always).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GetOptions, ObjectStore, StoredObject } from '../../src/store/objects/object-store.js';
import { publish, type PublishOptions, type PublishResult } from '../../src/store/publication/publish.js';
import { S3ObjectStore } from '../../src/store/objects/s3-object-store.js';
import { resolveS3Config } from '../../src/store/objects/store-config.js';
import { startControlPlane, type StartOptions, type TestControlPlane } from './control-plane.js';
import type { TestS3 } from './s3rver.js';

export type StoreOp = 'get' | 'put' | 'has' | 'list';

/** An ObjectStore that counts every request and can be told to fail some. */
export interface CountingStore extends ObjectStore {
  readonly counts: Record<StoreOp, number>;
  total(): number;
  /** Throw this (or what it returns) instead of calling the store, for ops matching `when`. */
  failWith: ((op: StoreOp, key: string) => Error | null) | null;
  /** Replaces what a GET found (e.g. a torn body), when set. */
  rewriteGet: ((key: string, got: StoredObject) => StoredObject) | null;
}

export function countingStore(inner: ObjectStore): CountingStore {
  const counts: Record<StoreOp, number> = { get: 0, put: 0, has: 0, list: 0 };
  const wrapper: CountingStore = {
    description: inner.description,
    counts,
    failWith: null,
    rewriteGet: null,
    total: () => counts.get + counts.put + counts.has + counts.list,
    async get(key: string, options: GetOptions): Promise<StoredObject | null | 'not-modified'> {
      counts.get++;
      const err = wrapper.failWith?.('get', key);
      if (err) throw err;
      const got = await inner.get(key, options);
      return got === null || got === 'not-modified' || wrapper.rewriteGet === null ? got : wrapper.rewriteGet(key, got);
    },
    async put(key: string, body: Buffer, contentType?: string): Promise<void> {
      counts.put++;
      const err = wrapper.failWith?.('put', key);
      if (err) throw err;
      return inner.put(key, body, contentType);
    },
    async has(key: string): Promise<boolean> {
      counts.has++;
      const err = wrapper.failWith?.('has', key);
      if (err) throw err;
      return inner.has(key);
    },
    async *list(prefix: string): AsyncIterable<string> {
      counts.list++;
      const err = wrapper.failWith?.('list', prefix);
      if (err) throw err;
      yield* inner.list(prefix);
    },
    close: () => inner.close(),
  };
  return wrapper;
}

/** The store with the PUTs of keys matching `skip` silently dropped (to build broken publications). */
export function droppingPuts(inner: ObjectStore, skip: (key: string) => boolean): ObjectStore {
  return {
    description: inner.description,
    get: (key, options) => inner.get(key, options),
    put: async (key, body, contentType) => (skip(key) ? undefined : inner.put(key, body, contentType)),
    has: (key) => inner.has(key),
    list: (prefix) => inner.list(prefix),
    close: () => inner.close(),
  };
}

export function s3Store(s3: TestS3, prefix: string, timeoutMs = 5_000): S3ObjectStore {
  return new S3ObjectStore(resolveS3Config({ store: `s3://${s3.bucket}/${prefix}`, timeoutMs, env: s3.env }));
}

/** Publishes `dataDir` to `s3://bucket/prefix` in-process. */
export async function publishTo(
  s3: TestS3,
  prefix: string,
  dataDir: string,
  extra: Partial<PublishOptions> & { wrap?: (store: ObjectStore) => ObjectStore } = {},
): Promise<PublishResult> {
  const raw = s3Store(s3, prefix);
  const store = extra.wrap ? extra.wrap(raw) : raw;
  try {
    return await publish({ dataDir, store, maxFileSize: 64 * 1024 * 1024, log: () => undefined, ...extra });
  } finally {
    await raw.close();
  }
}

export interface BucketControlPlane extends TestControlPlane {
  /** The counting wrapper around the replica's object store. */
  readonly store: CountingStore;
}

/** A control plane serving `s3://bucket/prefix`, with its state and audit log in a temp dir. */
export async function startBucketControlPlane(s3: TestS3, prefix: string, options: Partial<StartOptions> = {}): Promise<BucketControlPlane> {
  const dir = await mkdtemp(join(tmpdir(), 'kfs-replica-'));
  let counting: CountingStore | null = null;
  const cp = await startControlPlane({
    store: `s3://${s3.bucket}/${prefix}`,
    env: s3.env,
    stateFile: join(dir, 'state.json'),
    auditLog: join(dir, 'audit.log'),
    publicationPollMs: 100,
    // Generous: s3rver on a loaded 2-CPU machine can take seconds; fault tests set their own.
    s3TimeoutMs: 10_000,
    ...options,
    deps: {
      ...options.deps,
      wrapObjectStore: (store) => {
        counting = countingStore(store);
        return counting;
      },
    },
  });
  return {
    ...cp,
    store: counting as unknown as CountingStore,
    async close() {
      await cp.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
