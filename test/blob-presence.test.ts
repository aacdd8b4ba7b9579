// blob-presence: which blobs a bucket holds (and which were written since a
// time), asked one HEAD each for a few, one listing of blobs/ for many; and
// eachLimited, which runs that work a bounded number at a time.

import { describe, expect, it } from 'vitest';
import { blobKey } from '../src/core/publication.js';
import { sha256Hex } from '../src/core/sha256.js';
import type { ListedObject, SweepableStore } from '../src/store/objects/object-store.js';
import { HEAD_AT_MOST, eachLimited, presentBlobs, recentBlobs } from '../src/store/publication/blob-presence.js';

/** An in-memory bucket that counts what it is asked. */
function bucket(objects: Record<string, number>) {
  const asked = { has: 0, lastModified: 0, list: [] as string[], listObjects: [] as string[] };
  const store: SweepableStore = {
    description: 'memory',
    get: async () => null,
    put: async () => {},
    has: async (key) => (asked.has++, key in objects),
    async *list(prefix) {
      asked.list.push(prefix);
      for (const key of Object.keys(objects)) if (key.startsWith(prefix)) yield key;
    },
    async *listObjects(prefix): AsyncIterable<ListedObject> {
      asked.listObjects.push(prefix);
      for (const [key, at] of Object.entries(objects)) if (key.startsWith(prefix)) yield { key, size: 1, lastModified: at };
    },
    deleteMany: async () => {},
    lastModified: async (key) => (asked.lastModified++, objects[key] ?? null),
    close: async () => {},
  };
  return { store, asked };
}

const shas = (n: number, tag = 'b') => Array.from({ length: n }, (_, i) => sha256Hex(`${tag}${i}`));

describe('presentBlobs', () => {
  it('asks one HEAD each for up to HEAD_AT_MOST blobs', async () => {
    expect(HEAD_AT_MOST).toBe(256);
    const wanted = shas(HEAD_AT_MOST);
    const held = wanted.filter((_, i) => i % 3 === 0);
    const { store, asked } = bucket(Object.fromEntries(held.map((s) => [blobKey(s), 0])));
    expect(await presentBlobs(store, wanted)).toEqual(new Set(held));
    expect(asked.has).toBe(HEAD_AT_MOST);
    expect(asked.list).toEqual([]);
  });

  it('goes through the given has (e.g. with retries)', async () => {
    const { store, asked } = bucket({});
    const seen: string[] = [];
    const wanted = shas(2);
    const got = await presentBlobs(store, wanted, async (key) => (seen.push(key), key === blobKey(wanted[1] as string)));
    expect(got).toEqual(new Set([wanted[1]]));
    expect(seen.sort()).toEqual(wanted.map(blobKey).sort());
    expect(asked.has).toBe(0);
  });

  it('lists blobs/ once for more, and takes only wanted sha256 keys from it', async () => {
    const wanted = shas(HEAD_AT_MOST + 1);
    const held = wanted.slice(0, 5);
    const other = sha256Hex('not wanted');
    const { store, asked } = bucket({
      ...Object.fromEntries(held.map((s) => [blobKey(s), 0])),
      [blobKey(other)]: 0,
      [`blobs/${(held[0] as string).slice(0, 63)}`]: 0,
      [`blobs/${held[0] as string}.tmp`]: 0,
      'current.json': 0,
    });
    expect(await presentBlobs(store, wanted)).toEqual(new Set(held));
    expect(asked.list).toEqual(['blobs/']);
    expect(asked.has).toBe(0);
  });
});

describe('recentBlobs', () => {
  it('for a few: one LastModified each, kept when at or after since', async () => {
    const [old, exact, young, missing] = shas(4) as [string, string, string, string];
    const { store, asked } = bucket({ [blobKey(old)]: 999, [blobKey(exact)]: 1000, [blobKey(young)]: 1001 });
    expect(await recentBlobs(store, [old, exact, young, missing], 1000)).toEqual(new Set([exact, young]));
    expect(asked.lastModified).toBe(4);
    expect(asked.listObjects).toEqual([]);
  });

  it('exactly HEAD_AT_MOST: still one LastModified each; a missing blob is never recent, even since 0', async () => {
    const wanted = shas(HEAD_AT_MOST);
    const { store, asked } = bucket({ [blobKey(wanted[0] as string)]: 0 });
    expect(await recentBlobs(store, wanted, 0)).toEqual(new Set([wanted[0]]));
    expect(asked.lastModified).toBe(HEAD_AT_MOST);
    expect(asked.listObjects).toEqual([]);
  });

  it('goes through the given lastModified', async () => {
    const { store, asked } = bucket({});
    const [a] = shas(1) as [string];
    expect(await recentBlobs(store, [a], 5, async () => 5)).toEqual(new Set([a]));
    expect(asked.lastModified).toBe(0);
  });

  it('for many: one listing of blobs/ with ages, wanted sha256 keys only', async () => {
    const wanted = shas(HEAD_AT_MOST + 1);
    const [old, exact, young] = wanted as [string, string, string];
    const { store, asked } = bucket({
      [blobKey(old)]: 999,
      [blobKey(exact)]: 1000,
      [blobKey(young)]: 1001,
      [blobKey(sha256Hex('unwanted'))]: 2000,
      [`blobs/${young.toUpperCase()}`]: 2000,
    });
    expect(await recentBlobs(store, wanted, 1000)).toEqual(new Set([exact, young]));
    expect(asked.listObjects).toEqual(['blobs/']);
    expect(asked.lastModified).toBe(0);
  });
});

describe('eachLimited', () => {
  it('runs every item, at most limit at a time', async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await eachLimited([1, 2, 3, 4, 5, 6, 7], 3, async (i) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 2));
      done.push(i);
      running--;
    });
    expect(done.sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(most).toBe(3);
  });

  it('no items: no work', async () => {
    let calls = 0;
    await eachLimited([], 4, async () => void calls++);
    expect(calls).toBe(0);
  });

  it('the first error stops new work and is thrown', async () => {
    const started: number[] = [];
    const failure = eachLimited([1, 2, 3, 4, 5], 1, async (i) => {
      started.push(i);
      if (i === 2) throw new Error('HEAD failed');
      if (i === 3) throw new Error('later failure');
    });
    const thrown: unknown = await failure.then(() => null, (e: unknown) => e);
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).message).toBe('HEAD failed');
    expect(started).toEqual([1, 2]);
  });

  it('with work in flight, the first error is the one thrown', async () => {
    const failure = eachLimited([1, 2], 2, async (i) => {
      await new Promise((r) => setTimeout(r, i === 1 ? 1 : 20));
      throw new Error(`failure ${i}`);
    });
    await expect(failure).rejects.toThrow('failure 1');
  });
});
