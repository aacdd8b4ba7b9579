// gc's decisions, in process against an in-memory bucket whose objects carry
// their own LastModified: which history entries are roots, how each listed
// key is classed (marked, young, other, swept by kind) at the grace's exact
// edge, deletions in batches with the lock checked before each, progress,
// and what a broken publication does to the mark. The same rules against a
// real S3 server are in gc.test.ts.

import { describe, expect, it } from 'vitest';
import { blobKey, directoryKey, historyKey, indexKey, POINTER_KEY, PUBLICATION_FORMAT, serializeIndex, serializePointer, type Pointer } from '../src/core/publication.js';
import { snapshotScope } from '../src/core/session/plan.js';
import { sha256Hex } from '../src/core/sha256.js';
import { GC_FENCE_KEY } from '../src/core/gc-fence.js';
import { collectGarbage, kindOf, type GcProgress } from '../src/store/gc/gc.js';
import { historyRoots } from '../src/store/gc/gc-roots.js';
import type { ListedObject } from '../src/store/objects/object-store.js';
import { MemoryBucket } from './helpers/memory-bucket.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const GRACE = 3_600_000;
const EDGE = NOW - GRACE;
const OLD = EDGE - 1;
const hex = (c: string) => c.repeat(64);

const newBucket = () => new MemoryBucket({ description: 's3://memory/gc', setAt: OLD, putAt: NOW });

/** A publication of one scope with these file texts, written whole (blobs, index, directory, history copy). */
function publish(bucket: MemoryBucket, texts: string[], publishedAt: string, at = OLD): Pointer {
  const files = texts.map((t, i) => ({ path: `f${i}.md`, size: Buffer.byteLength(t), mtimeMs: 0, sha256: sha256Hex(Buffer.from(t)) }));
  for (const t of texts) bucket.set(blobKey(sha256Hex(Buffer.from(t))), t, at);
  const snapshot = snapshotScope('account', files);
  bucket.set(indexKey('account', snapshot.version), serializeIndex(snapshot), at);
  const directory = Buffer.from(`{"teams":{},"at":"${publishedAt}"}`);
  bucket.set(directoryKey(sha256Hex(directory)), directory, at);
  const pointer: Pointer = { format: PUBLICATION_FORMAT, publishedAt, directory: sha256Hex(directory), scopes: { account: snapshot.version } };
  bucket.set(historyKey(pointer), serializePointer(pointer), at);
  return pointer;
}

function current(bucket: MemoryBucket, pointer: Pointer): void {
  bucket.set(POINTER_KEY, serializePointer(pointer), OLD);
}

const gc = (bucket: MemoryBucket, extra: Partial<Parameters<typeof collectGarbage>[0]> = {}) =>
  collectGarbage({ store: bucket, keep: 1, graceMs: GRACE, delete: false, served: null, log: () => undefined, now: () => NOW, ...extra });

describe('historyRoots', () => {
  const e = (key: string, lastModified: number): ListedObject => ({ key, size: 1, lastModified });

  it('the last `keep` by key, every entry written within the grace (its start included), and the newest one before it', () => {
    const entries = [e('p/5', EDGE + 10), e('p/1', OLD - 40), e('p/3', OLD - 5), e('p/2', OLD - 30), e('p/4', EDGE)];
    expect(historyRoots(entries, 2, EDGE)).toEqual(
      new Map([
        ['p/4', ['last', 'within-grace']],
        ['p/5', ['last', 'within-grace']],
        ['p/3', ['within-grace']],
      ]),
    );
    expect(historyRoots(entries, 0, EDGE)).toEqual(new Map([['p/4', ['within-grace']], ['p/5', ['within-grace']], ['p/3', ['within-grace']]]));
  });

  it('before the grace, the newest by LastModified wins, whatever the key order (ties: the later key)', () => {
    const entries = [e('p/b', OLD - 5), e('p/a', OLD - 1), e('p/c', OLD - 9), e('p/d', OLD - 1)];
    expect(historyRoots(entries, 0, EDGE)).toEqual(new Map([['p/d', ['within-grace']]]));
    expect(historyRoots([], 3, EDGE)).toEqual(new Map());
    expect(historyRoots([e('p/only', EDGE + 1)], 5, EDGE)).toEqual(new Map([['p/only', ['last', 'within-grace']]]));
  });
});

describe('kindOf', () => {
  it('names only the keys of the publication layout', () => {
    expect(kindOf(blobKey(hex('a')))).toBe('blobs');
    expect(kindOf(indexKey('team_x-1', hex('b')))).toBe('indexes');
    expect(kindOf(directoryKey(hex('c')))).toBe('directories');
    expect(kindOf('publications/20260101T000000.000Z-abc.json')).toBe('publications');
    for (const key of [POINTER_KEY, `blobs/${'a'.repeat(63)}`, `blobs/${hex('A')}`, `x/blobs/${hex('a')}`, `blobs/${hex('a')}.bak`, `indexes/Team/${hex('b')}.json`, `indexes/${hex('b')}.json`, `directories/${hex('c')}`, 'publications/sub/x.json', 'publications/x.txt', 'notes/readme']) {
      expect(kindOf(key), key).toBeNull();
    }
  });
});

describe('collectGarbage', () => {
  it('classes every listed object: marked, young (the grace edge included), other, swept by kind; a dry run deletes nothing', async () => {
    const bucket = newBucket();
    const gone = publish(bucket, ['old one', 'shared'], '2026-05-01T00:00:00.000Z', OLD - 10_000);
    const kept = publish(bucket, ['shared', 'new one'], '2026-05-02T00:00:00.000Z');
    current(bucket, kept);
    bucket.set(blobKey(hex('e')), 'young at the edge', EDGE);
    bucket.set(blobKey(hex('f')), 'young', NOW);
    bucket.set('notes/readme.txt', 'not ours');
    bucket.set(`blobs/${'0'.repeat(10)}`, 'not a blob name');
    const result = await gc(bucket, { keep: 1, graceMs: 0 });
    // graceMs 0: every object is old except those written at NOW; the newest history entry before NOW (kept) is a root.
    expect(result.roots.map((r) => [r.publishedAt, r.reasons])).toEqual([['2026-05-02T00:00:00.000Z', ['current', 'last', 'within-grace']]]);
    const size = (...texts: string[]) => texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
    expect(result.young).toEqual({ objects: 1, bytes: size('young') });
    expect(result.other).toEqual({ objects: 3, bytes: bucket.objects.get(POINTER_KEY)!.bytes.length + size('not ours', 'not a blob name') });
    expect(result.sweptByKind.blobs).toEqual({ objects: 2, bytes: size('old one', 'young at the edge') });
    expect(result.sweptByKind.indexes.objects).toBe(1);
    expect(result.sweptByKind.directories.objects).toBe(1);
    expect(result.sweptByKind.publications).toEqual({ objects: 1, bytes: serializePointer(gone).length });
    expect(result.swept.objects).toBe(5);
    expect(result.marked.objects).toBe(5); // kept's two blobs, index, directory, history copy
    expect(result.listed.objects).toBe(result.marked.objects + result.young.objects + result.other.objects + result.swept.objects);
    expect(result.listed.bytes).toBe([...bucket.objects.values()].reduce((n, o) => n + o.bytes.length, 0));
    expect(result.deleted).toBe(false);
    expect(bucket.deletes).toEqual([]);

    // With the hour's grace, the object written at its very start is young, not swept.
    const graced = await gc(bucket, { keep: 1 });
    expect(graced.young.objects).toBe(2);
    expect(graced.sweptByKind.blobs.objects).toBe(1);
  });

  it('--delete removes exactly what the dry run reported, in batches of 1 000, checking the lock before each and reporting each', async () => {
    const bucket = newBucket();
    current(bucket, publish(bucket, ['kept'], '2026-05-02T00:00:00.000Z'));
    for (let i = 0; i < 2_500; i++) bucket.set(blobKey(sha256Hex(Buffer.from(`doomed ${i}`))), `doomed ${i}`);
    const dry = await gc(bucket);
    expect(dry.swept.objects).toBe(2_500);
    const progress: GcProgress[] = [];
    let checks = 0;
    const result = await gc(bucket, {
      delete: true,
      beforeDelete: async () => {
        checks++;
      },
      progress: (p) => progress.push(p),
      progressIntervalMs: 3_600_000,
    });
    expect(result.deleted).toBe(true);
    expect(bucket.deletes.map((b) => b.length)).toEqual([1_000, 1_000, 500]);
    // Before each batch, and once more before lowering the fence (another gc's must stay up).
    expect(checks).toBe(4);
    expect(JSON.parse((bucket.objects.get(GC_FENCE_KEY)?.bytes ?? '').toString())).toMatchObject({ state: 'idle' });
    // Listing progress is rate-limited (only the forced final line here); every batch is reported.
    // The listing now includes the fence gc raised first.
    expect(progress).toEqual([
      { phase: 'listed', done: dry.listed.objects + 1 },
      { phase: 'deleted', done: 1_000, total: 2_500 },
      { phase: 'deleted', done: 2_000, total: 2_500 },
      { phase: 'deleted', done: 2_500, total: 2_500 },
    ]);
    expect((await gc(bucket)).swept.objects).toBe(0);
    expect(bucket.objects.size).toBe(dry.listed.objects - 2_500 + 1);
  });

  it('before each batch, keys written again since the listing and keys a publication made current since are spared', async () => {
    const bucket = newBucket();
    current(bucket, publish(bucket, ['kept'], '2026-05-02T00:00:00.000Z'));
    // A publication whose objects are there, unnamed (its history copy gone): garbage.
    const old = publish(bucket, ['old one'], '2026-05-01T00:00:00.000Z');
    bucket.objects.delete(historyKey(old));
    const rewritten = blobKey(sha256Hex(Buffer.from('rewritten')));
    bucket.set(rewritten, 'rewritten');
    let publishedMeanwhile = false;
    const lastModified = bucket.lastModified.bind(bucket);
    bucket.lastModified = async (key) => {
      // Between the listing and the first batch: a publish uploads one doomed blob again
      // and makes current a publication naming other doomed objects.
      if (!publishedMeanwhile) {
        publishedMeanwhile = true;
        bucket.set(rewritten, 'rewritten', NOW);
        bucket.set(historyKey(old), serializePointer(old), NOW);
        bucket.set(POINTER_KEY, serializePointer(old), NOW);
      }
      return lastModified(key);
    };
    const result = await gc(bucket, { delete: true });
    const named = [blobKey(sha256Hex(Buffer.from('old one'))), indexKey('account', old.scopes['account'] as string), directoryKey(old.directory)];
    for (const key of [rewritten, ...named]) expect(bucket.objects.has(key), key).toBe(true);
    expect(result.spared.objects).toBe(4);
    expect(result.swept.objects).toBe(0);
    expect(bucket.deletes).toEqual([]);
  });

  it('a lost lock stops the deletions before the next batch', async () => {
    const bucket = newBucket();
    current(bucket, publish(bucket, ['kept'], '2026-05-02T00:00:00.000Z'));
    for (let i = 0; i < 1_500; i++) bucket.set(blobKey(sha256Hex(Buffer.from(`doomed ${i}`))), `doomed ${i}`);
    let checks = 0;
    const run = gc(bucket, {
      delete: true,
      beforeDelete: async () => {
        if (++checks === 2) throw new Error('lock lost');
      },
    });
    await expect(run).rejects.toThrow('lock lost');
    expect(bucket.deletes.map((b) => b.length)).toEqual([1_000]);
  });

  it('progress with no interval reports every listed object', async () => {
    const bucket = newBucket();
    current(bucket, publish(bucket, ['kept'], '2026-05-02T00:00:00.000Z'));
    const progress: GcProgress[] = [];
    const result = await gc(bucket, { progress: (p) => progress.push(p), progressIntervalMs: 0 });
    const listed = result.listed.objects;
    expect(progress.map((p) => p.done)).toEqual([...Array.from({ length: listed }, (_, i) => i + 1), listed]);
    expect(progress.every((p) => p.phase === 'listed')).toBe(true);
  });

  it('roots: current, the last N, the one current at the grace start, and what replicas serve, each reason once', async () => {
    const bucket = newBucket();
    const p1 = publish(bucket, ['one'], '2026-05-01T00:00:00.000Z', OLD - 30);
    const p2 = publish(bucket, ['two'], '2026-05-02T00:00:00.000Z', OLD - 20);
    const p3 = publish(bucket, ['three'], '2026-05-03T00:00:00.000Z', OLD - 10);
    const p4 = publish(bucket, ['four'], '2026-05-04T00:00:00.000Z', NOW);
    current(bucket, p4);
    const result = await gc(bucket, { keep: 2, served: [p1, p1] });
    const reasons = Object.fromEntries(result.roots.map((r) => [r.publishedAt, r.reasons]));
    expect(reasons).toEqual({
      [p4.publishedAt]: ['current', 'last', 'within-grace'],
      [p3.publishedAt]: ['last', 'within-grace'],
      [p1.publishedAt]: ['served'],
    });
    expect(result.sweptByKind.blobs.objects).toBe(1); // "two" alone
    expect(result.sweptByKind.publications.objects).toBe(1);
    expect(bucket.objects.has(historyKey(p2))).toBe(true); // a dry run
  });

  it('without current.json gc refuses, naming the store; a broken history entry is a warning and stays; a missing index a warning; a broken index stops gc before deleting', async () => {
    const empty = newBucket();
    await expect(gc(empty, { delete: true })).rejects.toThrow('s3://memory/gc: no current.json: not a publication (a wrong --store?); gc collects nothing without one');

    const bucket = newBucket();
    const p = publish(bucket, ['kept'], '2026-05-02T00:00:00.000Z');
    current(bucket, p);
    bucket.set('publications/20260503T000000.000Z-broken.json', 'not json', OLD);
    const logs: string[] = [];
    const warned = await gc(bucket, { delete: true, log: (l) => logs.push(l) });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/^warning: publications\/20260503T000000\.000Z-broken\.json: .*; not a root$/);
    expect(bucket.objects.has('publications/20260503T000000.000Z-broken.json')).toBe(true);
    expect(warned.roots).toHaveLength(1);

    const index = indexKey('account', p.scopes.account as string);
    bucket.objects.delete(index);
    const missing: string[] = [];
    await gc(bucket, { log: (l) => missing.push(l) });
    expect(missing).toContain(`warning: ${index} is named by a publication gc keeps but is not in the store`);

    bucket.set(index, '{"format":1,"scope":"account","version":"wrong","files":[]}');
    bucket.set(blobKey(hex('d')), 'doomed');
    await expect(gc(bucket, { delete: true })).rejects.toThrow(/: a publication gc keeps names it and its blobs cannot be known; nothing more was deleted \(repair or republish first\)$/);
    expect(bucket.deletes).toEqual([]);
    expect(bucket.objects.has(blobKey(hex('d')))).toBe(true);
  });
});
