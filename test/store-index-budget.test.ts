// What a hostile bucket can make a replica hold for indexes: indexes that
// load at once stay within the index load budget (padded indexes are still
// valid: their version hashes the files, not the bytes), and a publication
// whose indexes total more than the cap is refused whole, with one log line,
// while the previous one stays served. BucketPackStore over s3rver.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexKey, parsePointer, POINTER_KEY, type Pointer } from '../src/core/publication.js';
import { BucketPackStore } from '../src/store/publication/bucket-pack-store.js';
import type { GetOptions, ObjectStore, StoredObject } from '../src/store/objects/object-store.js';
import { publishTo, s3Store } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const MiB = 1024 * 1024;
const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
  users: {},
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/search/DUTY.md': '# Search\n',
    'teams/storage/DUTY.md': '# Storage\n',
  },
};

let s3: TestS3;
let n = 0;
beforeAll(async () => { s3 = await startS3(); });
afterAll(async () => { await s3?.close(); });

/** The store, with the largest total of `maxBytes` that index GETs in flight together asked for. */
function watched(inner: ObjectStore) {
  let inFlight = 0;
  const seen = { peak: 0, indexGets: 0 };
  const store: ObjectStore = {
    description: inner.description,
    async get(key: string, options: GetOptions): Promise<StoredObject | null | 'not-modified'> {
      if (!key.startsWith('indexes/')) return inner.get(key, options);
      seen.indexGets++;
      inFlight += options.maxBytes;
      seen.peak = Math.max(seen.peak, inFlight);
      try {
        return await inner.get(key, options);
      } finally {
        inFlight -= options.maxBytes;
      }
    },
    put: (key, body, type) => inner.put(key, body, type),
    has: (key) => inner.has(key),
    list: (prefix) => inner.list(prefix),
    close: () => inner.close(),
  };
  return { store, seen };
}

/** Rewrites every index the current pointer names with `bytes` of trailing spaces (still valid JSON, same version). */
async function padIndexes(store: ObjectStore, bytes: number): Promise<Pointer> {
  const got = await store.get(POINTER_KEY, { maxBytes: MiB });
  if (got === null || got === 'not-modified') throw new Error('no pointer');
  const pointer = parsePointer(got.bytes);
  for (const [scope, version] of Object.entries(pointer.scopes)) {
    const index = await store.get(indexKey(scope, version), { maxBytes: MiB });
    if (index === null || index === 'not-modified') throw new Error(`no index for ${scope}`);
    await store.put(indexKey(scope, version), Buffer.concat([index.bytes, Buffer.alloc(bytes, ' ')]), 'application/json');
  }
  return pointer;
}

async function setUp(budget: number, cap: number) {
  const prefix = `budget${++n}`;
  const data = await makeDataDir(spec);
  await publishTo(s3, prefix, data);
  const raw = s3Store(s3, prefix);
  const { store, seen } = watched(raw);
  const logs: string[] = [];
  const packs = new BucketPackStore({ store, maxFileSize: MiB, cacheBytes: MiB, log: (l) => logs.push(l), indexLoadBudgetBytes: budget, maxPublicationIndexBytes: cap });
  const close = async () => {
    await raw.close();
    await removeDataDir(data);
  };
  return { prefix, data, raw, packs, seen, logs, close };
}

describe('index memory', () => {
  it('indexes loading at once ask for no more than the index load budget together', async () => {
    const t = await setUp(4 * MiB, 64 * MiB);
    try {
      await padIndexes(t.raw, 3 * MiB);
      expect(await t.packs.refresh()).toBe('switched');
      expect(t.packs.scopes().map((s) => s.scope)).toEqual(['account', 'team_payments', 'team_search', 'team_storage']);
      // Four 3 MiB indexes: each loaded alone, never two at a time.
      expect(t.seen.peak).toBeLessThanOrEqual(4 * MiB);
      expect(t.seen.indexGets).toBe(8);
    } finally {
      await t.close();
    }
  });

  it('a publication whose indexes total more than the cap is refused whole; the previous one stays served', async () => {
    const t = await setUp(8 * MiB, 10 * MiB);
    try {
      expect(await t.packs.refresh()).toBe('switched');
      const before = t.packs.pointer;
      for (const team of ['payments', 'search', 'storage']) await writeDataFile(t.data, `teams/${team}/DUTY.md`, `# ${team} v2\n`);
      await publishTo(s3, t.prefix, t.data);
      await padIndexes(t.raw, 4 * MiB);
      expect(await t.packs.refresh()).toBe('refused');
      expect(t.packs.pointer).toEqual(before);
      expect(t.logs.filter((l) => /refusing the publication: .*indexes total more than 10\.0 MiB/.test(l))).toHaveLength(1);
      expect((await t.packs.read('team_search', 'DUTY.md'))?.bytes.toString()).toBe('# Search\n');
    } finally {
      await t.close();
    }
  });
});
