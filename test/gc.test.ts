// `knowledgefs gc` against a real S3-protocol server (s3rver): what it keeps
// (the current pointer, the last --keep publications, those current within
// the grace, those replicas serve, anything younger than the grace, and
// everything outside the layout), what a dry run reports (and that it
// deletes nothing), and that --delete removes exactly the rest.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobKey, directoryKey, historyKey, indexKey, type Pointer } from '../src/core/publication.js';
import { sha256Hex } from '../src/core/sha256.js';
import { collectGarbage, type GcResult } from '../src/store/gc/gc.js';
import type { S3ObjectStore } from '../src/store/objects/s3-object-store.js';
import { s3Store } from './helpers/bucket.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { GC_SPEC, threePublications } from './helpers/gc-fixture.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';


let s3: TestS3;
let n = 0;
const prefix = () => `gc${++n}`;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});


/** Every key a publication names, its history copy included. */
function keysOf(pointer: Pointer, blobs: string[]): string[] {
  return [
    historyKey(pointer),
    directoryKey(pointer.directory),
    ...Object.entries(pointer.scopes).map(([scope, version]) => indexKey(scope, version)),
    ...blobs.map((text) => blobKey(sha256Hex(Buffer.from(text)))),
  ];
}

async function keys(store: S3ObjectStore): Promise<string[]> {
  const all: string[] = [];
  for await (const key of store.list('')) all.push(key);
  return all.sort();
}

/** An hour from now: everything written so far is an hour old. */
const later = () => Date.now() + 3_600_000;

describe('gc', () => {
  it('a dry run deletes nothing and reports what --delete then removes, exactly the unnamed old objects', async () => {
    const p = prefix();
    const data = await makeDataDir(GC_SPEC);
    const store = s3Store(s3, p);
    try {
      const [p1, p2, p3] = (await threePublications(s3, p, data)) as [Pointer, Pointer, Pointer];
      await store.put('notes/readme.txt', Buffer.from('not ours\n'));
      const before = await keys(store);
      const run = (del: boolean): Promise<GcResult> => collectGarbage({ store, keep: 1, graceMs: 60_000, delete: del, served: [], log: () => undefined, now: later });

      const dry = await run(false);
      expect(await keys(store)).toEqual(before);
      const kept = new Set([...keysOf(p3, ['# Account\n', '# Payments\n', 'db v3\n']), 'current.json', 'notes/readme.txt']);
      const doomed = before.filter((k) => !kept.has(k));
      // p1 and p2: their db.md blob, their payments index and their history copies.
      expect(doomed.sort()).toEqual(
        [historyKey(p1), historyKey(p2), indexKey('team_payments', p1.scopes['team_payments'] as string), indexKey('team_payments', p2.scopes['team_payments'] as string), blobKey(sha256Hex(Buffer.from('db v1\n'))), blobKey(sha256Hex(Buffer.from('db v2\n')))].sort(),
      );
      expect(dry.deleted).toBe(false);
      expect(dry.swept.objects).toBe(6);
      expect(dry.sweptByKind.blobs).toEqual({ objects: 2, bytes: 12 });
      expect(dry.sweptByKind.indexes.objects).toBe(2);
      expect(dry.sweptByKind.publications.objects).toBe(2);
      expect(dry.other.objects).toBe(2);
      expect(dry.listed.objects).toBe(before.length);

      const done = await run(true);
      expect(done.swept).toEqual(dry.swept);
      expect(done.spared.objects).toBe(0);
      // And gc's fence, left idle (core/gc-fence.ts).
      expect(await keys(store)).toEqual([...before.filter((k) => kept.has(k)), 'gc.json'].sort());
      // Again: nothing left to do.
      expect((await run(true)).swept.objects).toBe(0);
    } finally {
      await store.close();
      await removeDataDir(data);
    }
  });

  it('keeps what is younger than the grace, the last --keep publications and those current within the grace', async () => {
    const p = prefix();
    const data = await makeDataDir(GC_SPEC);
    const store = s3Store(s3, p);
    try {
      const [p1, p2] = (await threePublications(s3, p, data)) as [Pointer, Pointer, Pointer];
      const young = await collectGarbage({ store, keep: 1, graceMs: 3_600_000, delete: true, served: [], log: () => undefined });
      expect(young.swept.objects).toBe(0);
      expect(young.young.objects).toBe(0);
      // All three were current within the hour: all kept, as roots.
      expect(young.roots.map((r) => r.reasons.join(',')).sort()).toEqual(['current,last,within-grace', 'within-grace', 'within-grace']);

      const lastTwo = await collectGarbage({ store, keep: 2, graceMs: 60_000, delete: false, served: [], log: () => undefined, now: later });
      expect(lastTwo.roots.map((r) => r.publishedAt)).toContain(p2.publishedAt);
      expect(lastTwo.swept.objects).toBe(3); // p1's blob, index and history copy
      expect(lastTwo.roots.map((r) => r.publishedAt)).not.toContain(p1.publishedAt);

      // Unnamed and young: kept (a publish in progress uploads exactly such objects).
      await store.put(blobKey(sha256Hex(Buffer.from('uploading\n'))), Buffer.from('uploading\n'));
      const withUpload = await collectGarbage({ store, keep: 3, graceMs: 3_600_000, delete: false, served: [], log: () => undefined });
      expect(withUpload.young).toEqual({ objects: 1, bytes: 10 });
      expect(withUpload.swept.objects).toBe(0);
    } finally {
      await store.close();
      await removeDataDir(data);
    }
  });

  it('a publication a replica serves is kept whole, however old', async () => {
    const p = prefix();
    const data = await makeDataDir(GC_SPEC);
    const store = s3Store(s3, p);
    try {
      const [p1] = (await threePublications(s3, p, data)) as [Pointer, Pointer, Pointer];
      const r = await collectGarbage({ store, keep: 1, graceMs: 60_000, delete: true, served: [p1], log: () => undefined, now: later });
      expect(r.roots.find((x) => x.publishedAt === p1.publishedAt)?.reasons).toEqual(['served']);
      const left = new Set(await keys(store));
      for (const key of keysOf(p1, ['db v1\n']).slice(1)) expect(left.has(key), key).toBe(true);
      expect(left.has(blobKey(sha256Hex(Buffer.from('db v2\n'))))).toBe(false);
    } finally {
      await store.close();
      await removeDataDir(data);
    }
  });

  it('refuses a prefix without a publication, deleting nothing', async () => {
    const store = s3Store(s3, prefix());
    try {
      await store.put(blobKey(sha256Hex(Buffer.from('x'))), Buffer.from('x'));
      await expect(collectGarbage({ store, keep: 1, graceMs: 0, delete: true, served: [], log: () => undefined, now: later })).rejects.toThrow(/no current\.json: not a publication/);
      expect(await keys(store)).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});
