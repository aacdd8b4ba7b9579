// The replica's blob cache on its own: bounded in memory, spilling evicted
// blobs to disk and reading them back verified, never handing out bytes that
// do not hash to their name, one fetch for concurrent misses.

import { createHash } from 'node:crypto';
import { chmod, chown, lstat, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobCache } from '../src/store/publication/blob-cache.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const blob = (i: number, size = 1000) => Buffer.alloc(size, `blob ${i} `);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kfs-blobs-'));
});
afterEach(async () => {
  // Spills are written in the background: let the last ones land first.
  await new Promise((r) => setTimeout(r, 50));
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
});

function cache(opts: { memoryBytes: number; diskDir?: string; diskBytes?: number; source?: Map<string, Buffer> }) {
  const source = opts.source ?? new Map<string, Buffer>();
  const fetched: string[] = [];
  const logs: string[] = [];
  const c = new BlobCache({
    memoryBytes: opts.memoryBytes,
    diskDir: opts.diskDir,
    ...(opts.diskBytes !== undefined ? { diskBytes: opts.diskBytes } : {}),
    log: (l) => logs.push(l),
    fetch: async (s) => {
      fetched.push(s);
      await new Promise((r) => setTimeout(r, 5));
      const b = source.get(s);
      if (b === undefined) throw new Error(`no blob ${s}`);
      return b;
    },
    corrupt: (s, actual, from) => new Error(`${s} corrupt from ${from}: ${actual}`),
  });
  return { c, source, fetched, logs };
}

const settle = () => new Promise((r) => setTimeout(r, 50));

describe('BlobCache', () => {
  it('keeps at most memoryBytes in memory, least recently used out first', async () => {
    const { c, source, fetched } = cache({ memoryBytes: 3_000 });
    const blobs = [0, 1, 2, 3].map((i) => blob(i));
    for (const b of blobs) source.set(sha(b), b);
    for (const b of blobs) await c.get(sha(b), b.length);
    expect(c.size.memoryBytes).toBeLessThanOrEqual(3_000);
    expect(c.peek(sha(blobs[0] as Buffer))).toBeUndefined();
    expect(c.peek(sha(blobs[3] as Buffer))?.equals(blobs[3] as Buffer)).toBe(true);
    await c.get(sha(blobs[0] as Buffer), 1000);
    expect(fetched.filter((f) => f === sha(blobs[0] as Buffer))).toHaveLength(2);
  });

  it('shares one fetch between concurrent misses', async () => {
    const { c, source, fetched } = cache({ memoryBytes: 10_000 });
    const b = blob(7);
    source.set(sha(b), b);
    const got = await Promise.all(Array.from({ length: 10 }, () => c.get(sha(b), b.length)));
    expect(got.every((g) => g.equals(b))).toBe(true);
    expect(fetched).toHaveLength(1);
  });

  it('never caches or returns bytes that do not hash to their name', async () => {
    const { c, source } = cache({ memoryBytes: 10_000 });
    const good = blob(1);
    source.set(sha(good), blob(2));
    await expect(c.get(sha(good), good.length)).rejects.toThrow(/corrupt from store/);
    expect(c.peek(sha(good))).toBeUndefined();
    source.set(sha(good), good);
    expect((await c.get(sha(good), good.length)).equals(good)).toBe(true);
  });

  it('spills evicted blobs to disk, reads them back without a fetch, bounded by diskBytes', async () => {
    const { c, source, fetched } = cache({ memoryBytes: 2_500, diskDir: dir, diskBytes: 3_000 });
    const blobs = [0, 1, 2, 3, 4, 5].map((i) => blob(i));
    for (const b of blobs) source.set(sha(b), b);
    for (const b of blobs) await c.get(sha(b), b.length);
    await settle();
    const onDisk = (await readdir(dir)).filter((n) => !n.startsWith('.'));
    expect(onDisk.length).toBeGreaterThan(0);
    expect(c.size.diskBytes).toBeLessThanOrEqual(3_000);
    expect(onDisk.length * 1000).toBeLessThanOrEqual(3_000);
    const spilled = onDisk[0] as string;
    const before = fetched.length;
    const back = await c.get(spilled, 1000);
    expect(sha(back)).toBe(spilled);
    expect(fetched.length).toBe(before);
    expect(await readFile(join(dir, spilled))).toEqual(back);
  });

  it('a blob larger than memory goes straight to disk', async () => {
    const { c, source, fetched } = cache({ memoryBytes: 500, diskDir: dir });
    const big = blob(4, 2_000);
    source.set(sha(big), big);
    await c.get(sha(big), big.length);
    await settle();
    expect(c.peek(sha(big))).toBeUndefined();
    expect((await c.get(sha(big), big.length)).equals(big)).toBe(true);
    expect(fetched).toHaveLength(1);
  });

  it('a spilled file damaged on disk is dropped and fetched again, never served', async () => {
    const { c, source, fetched, logs } = cache({ memoryBytes: 1_500, diskDir: dir });
    const [a, b] = [blob(1), blob(2)];
    source.set(sha(a), a);
    source.set(sha(b), b);
    await c.get(sha(a), 1000);
    await c.get(sha(b), 1000); // a is evicted to disk
    await settle();
    await writeFile(join(dir, sha(a)), blob(9));
    const got = await c.get(sha(a), 1000);
    expect(got.equals(a)).toBe(true);
    expect(fetched.filter((f) => f === sha(a))).toHaveLength(2);
    expect(logs.some((l) => /corrupt from disk/.test(l))).toBe(true);
    // The damaged file was dropped, so the next eviction writes a good one, read back without a fetch.
    await c.get(sha(b), 1000);
    await c.get(sha(blob(3)), 1000).catch(() => undefined);
    source.set(sha(blob(3)), blob(3));
    await c.get(sha(blob(3)), 1000); // a is evicted to disk again
    await settle();
    expect((await readFile(join(dir, sha(a)))).equals(a)).toBe(true);
    expect((await c.get(sha(a), 1000)).equals(a)).toBe(true);
    expect(fetched.filter((f) => f === sha(a))).toHaveLength(2);
    expect(logs.filter((l) => /corrupt from disk/.test(l))).toHaveLength(1);
  });

  it('a blob of exactly memoryBytes is kept in memory', async () => {
    const { c, source } = cache({ memoryBytes: 1_000, diskDir: dir });
    const a = blob(1);
    source.set(sha(a), a);
    await c.get(sha(a), 1000);
    await settle();
    expect(c.peek(sha(a))?.equals(a)).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('reuses verified files a previous run left in the spill directory', async () => {
    const a = blob(3);
    await writeFile(join(dir, sha(a)), a);
    await writeFile(join(dir, 'not-a-blob'), 'x');
    const { c, fetched } = cache({ memoryBytes: 10_000, diskDir: dir });
    expect((await c.get(sha(a), 1000)).equals(a)).toBe(true);
    expect(fetched).toHaveLength(0);
  });

  it('counts memory hits and misses, and reports the bytes it holds in memory and on disk', async () => {
    const { c, source } = cache({ memoryBytes: 1_500, diskDir: dir });
    const [a, b] = [blob(1), blob(2)];
    source.set(sha(a), a);
    source.set(sha(b), b);
    expect(c.peek(sha(a))).toBeUndefined();
    expect([c.hits, c.misses]).toEqual([0, 0]); // a peek that misses is not a lookup the caller pays for
    await c.get(sha(a), 1000);
    expect([c.hits, c.misses]).toEqual([0, 1]);
    await c.get(sha(a), 1000);
    expect(c.peek(sha(a))?.equals(a)).toBe(true);
    expect([c.hits, c.misses]).toEqual([2, 1]);
    expect(c.size).toEqual({ memoryBytes: 1000, diskBytes: 0 });
    await c.get(sha(b), 1000); // a is evicted to disk
    await settle();
    expect(c.size).toEqual({ memoryBytes: 1000, diskBytes: 1000 });
    expect(await readdir(dir)).toEqual([sha(a)]);
    expect((await c.get(sha(a), 1000)).equals(a)).toBe(true); // from disk, back into memory
    expect([c.hits, c.misses]).toEqual([2, 3]);
  });

  it('without a spill directory nothing goes to disk', async () => {
    const { c, source, fetched } = cache({ memoryBytes: 1_500 });
    const [a, b] = [blob(1), blob(2)];
    source.set(sha(a), a);
    source.set(sha(b), b);
    await c.get(sha(a), 1000);
    await c.get(sha(b), 1000);
    await settle();
    expect(c.size.diskBytes).toBe(0);
    await c.get(sha(a), 1000);
    expect(fetched.filter((f) => f === sha(a))).toHaveLength(2);
  });

  it('logs each refused file once, however many others are refused in between', async () => {
    const [a, b] = [blob(11), blob(12)];
    // Larger than memory: each blob goes straight to disk, where a link then replaces it.
    const { c, source, logs } = cache({ memoryBytes: 100, diskDir: dir });
    for (const x of [a, b]) source.set(sha(x), x);
    for (const x of [a, b, a]) {
      await c.get(sha(x), 1000);
      // The spill is written behind the read: wait for the file, then for the cache to count it.
      for (let i = 0; i < 100 && !(await lstat(join(dir, sha(x))).catch(() => null))?.isFile(); i++) await settle();
      await settle();
      await rm(join(dir, sha(x)), { force: true });
      await rm(join(dir, 'elsewhere'), { force: true });
      await writeFile(join(dir, 'elsewhere'), x);
      await symlink(join(dir, 'elsewhere'), join(dir, sha(x)));
      expect((await c.get(sha(x), 1000)).equals(x)).toBe(true);
    }
    expect(logs.filter((l) => l.includes('not a file of this server'))).toEqual(
      [a, b].map((x) => `blob cache: ${join(dir, sha(x))} is a symbolic link, not a file of this server's; removed, fetching the blob again`),
    );
  });

  it('refuses a spill directory another user may write, naming it and the fix', async () => {
    await chmod(dir, 0o777);
    expect(() => cache({ memoryBytes: 1_000, diskDir: dir })).toThrow(
      new RegExp(`refusing the blob cache directory \\(--blob-cache-dir\\) ${dir}: .*another local user could plant links or FIFOs there.*Remove the directory`),
    );
  });

  it.skipIf(process.getuid?.() !== 0)('does not adopt a left file another user owns, or a link; one swapped in later is refused, removed and logged once', async () => {
    const [a, b, c0] = [blob(1), blob(2), blob(3)];
    // Left by "an earlier run": c0 owned by another user, b as a link to a file with the right bytes.
    await writeFile(join(dir, sha(c0)), c0);
    await chown(join(dir, sha(c0)), 65534, 65534);
    await writeFile(join(dir, 'elsewhere'), b);
    await symlink(join(dir, 'elsewhere'), join(dir, sha(b)));
    const { c, source, fetched, logs } = cache({ memoryBytes: 1_500, diskDir: dir });
    for (const x of [a, b, c0]) source.set(sha(x), x);
    expect(c.size.diskBytes).toBe(0);
    expect((await c.get(sha(c0), 1000)).equals(c0)).toBe(true);
    expect((await c.get(sha(b), 1000)).equals(b)).toBe(true);
    expect(fetched).toEqual([sha(c0), sha(b)]);
    // a is spilled by this run, then replaced by a link to the same bytes: refused, not followed.
    for (let round = 0; round < 2; round++) {
      await c.get(sha(a), 1000);
      await c.get(sha(b), 1000);
      await c.get(sha(c0), 1000); // a and b evicted, a to disk
      await settle();
      await rm(join(dir, sha(a)), { force: true });
      await symlink(join(dir, 'elsewhere'), join(dir, sha(a)));
      expect((await c.get(sha(a), 1000)).equals(a)).toBe(true);
      expect(await readdir(dir)).not.toContain(sha(a)); // the planted link is removed
    }
    expect(fetched.filter((f) => f === sha(a))).toHaveLength(3);
    expect(logs.filter((l) => l.includes(`${join(dir, sha(a))} is a symbolic link, not a file of this server's; removed`))).toHaveLength(1);
  });
});
