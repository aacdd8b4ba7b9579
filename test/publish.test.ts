// `publish` against a real S3-protocol server: what it uploads (only what the
// bucket lacks), in which order (the pointer last), what it reports, and
// what a failure midway leaves behind (the previous publication, current).

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../src/core/sha256.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { POINTER_KEY, parsePointer } from '../src/core/publication.js';
import { ObjectStoreError } from '../src/store/objects/object-store.js';
import { countingStore, publishTo, s3Store, type CountingStore } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments' },
  users: { alice: { teams: ['payments'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'account/same.md': 'shared bytes\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/copy-of-same.md': 'shared bytes\n',
    'teams/payments/runbooks/db.md': 'db v1\n',
  },
};

let s3: TestS3;
let n = 0;
const prefix = () => `pub${++n}`;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});

async function pointerBytes(p: string): Promise<Buffer | null> {
  const raw = s3Store(s3, p);
  try {
    const got = await raw.get(POINTER_KEY, { maxBytes: 1 << 20 });
    return got === null || got === 'not-modified' ? null : got.bytes;
  } finally {
    await raw.close();
  }
}

describe('publish', () => {
  it('uploads each distinct blob once, then indexes, directory.json and the pointer; again: nothing', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    let counting: CountingStore | null = null;
    // When each PUT completes, from a store that answers earlier requests later (the first of the 7 uploads after
    // 560 ms, the last after 80 ms): an upload the publish did not wait for finishes after the pointer starts.
    const order: string[] = [];
    let started = 0;
    let doneWhenPointerStarted = -1;
    const wrap = (st: Parameters<typeof countingStore>[0]) => {
      counting = countingStore(st);
      const put = counting.put.bind(counting);
      counting.put = async (key, body, type) => {
        const kind = key.split('/')[0] as string;
        if (kind === POINTER_KEY) doneWhenPointerStarted = order.length;
        const slowness = Math.max(0, 7 - started++) * 80;
        const result = await put(key, body, type);
        if (kind !== POINTER_KEY) await new Promise((r) => setTimeout(r, slowness));
        order.push(kind);
        return result;
      };
      return counting;
    };
    try {
      const first = await publishTo(s3, p, data, { wrap });
      expect(first.changed).toBe(true);
      expect(first.uploaded).toEqual({ blobs: 4, bytes: Buffer.byteLength('# Account\nshared bytes\n# Payments\ndb v1\n'), indexes: 2, directories: 1 });
      expect(first.scopes.map((s) => [s.scope, s.status, s.files])).toEqual([['account', 'added', 2], ['team_payments', 'added', 3]]);
      expect(first.directory).toBe('added');
      // The pointer is the last write, right after its copy in the history gc reads: every other PUT had completed before it began.
      expect(order.slice(-2)).toEqual(['publications', POINTER_KEY]);
      expect(doneWhenPointerStarted).toBe(started - 1);
      expect(order).toHaveLength(started);
      expect(order.slice(0, 4)).toEqual(['blobs', 'blobs', 'blobs', 'blobs']);
      const pointer = parsePointer((await pointerBytes(p)) as Buffer);
      expect(Object.keys(pointer.scopes)).toEqual(['account', 'team_payments']);

      const before = await pointerBytes(p);
      const again = await publishTo(s3, p, data, { wrap });
      expect(again.changed).toBe(false);
      expect(again.uploaded).toEqual({ blobs: 0, bytes: 0, indexes: 0, directories: 0 });
      expect((counting as unknown as CountingStore).counts.put).toBe(0);
      expect(again.scopes.every((s) => s.status === 'unchanged')).toBe(true);
      expect((await pointerBytes(p))?.equals(before as Buffer)).toBe(true);
    } finally {
      await removeDataDir(data);
    }
  });

  it('after a one-file edit uploads one blob, one index, the pointer and its history copy, and says what changed', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    let counting: CountingStore | null = null;
    try {
      await publishTo(s3, p, data);
      await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v2\n');
      await writeDataFile(data, 'teams/payments/new.md', 'new\n');
      const { rm } = await import('node:fs/promises');
      await rm(`${data}/teams/payments/copy-of-same.md`);
      const result = await publishTo(s3, p, data, { wrap: (st) => (counting = countingStore(st)) });
      expect(result.uploaded).toMatchObject({ blobs: 2, indexes: 1, directories: 0 });
      // Two blobs, one index, the history copy and the pointer.
      expect((counting as unknown as CountingStore).counts).toMatchObject({ put: 5, list: 0 });
      expect(result.scopes).toEqual([
        { scope: 'account', status: 'unchanged', files: 2 },
        { scope: 'team_payments', status: 'changed', files: 3, added: 1, modified: 1, removed: 1 },
      ]);
      expect(result.directory).toBe('unchanged');
    } finally {
      await removeDataDir(data);
    }
  });

  it('a removed team pack is reported removed; many new blobs are found with one listing, not a HEAD each', async () => {
    const p = prefix();
    const files: Record<string, string> = { 'teams/payments/DUTY.md': '# P\n' };
    for (let i = 0; i < 300; i++) files[`account/notes/${i}.md`] = `note ${i}\n`;
    const data = await makeDataDir({ ...spec, files });
    let counting: CountingStore | null = null;
    const progress: { blobsDone: number; blobsTotal: number }[] = [];
    try {
      const first = await publishTo(s3, p, data, { wrap: (st) => (counting = countingStore(st)), progress: (x) => progress.push(x), progressIntervalMs: 5 });
      expect(first.uploaded.blobs).toBe(301);
      expect((counting as unknown as CountingStore).counts).toMatchObject({ list: 1, has: 3 });
      // Progress while uploading, and a last report when done.
      expect(progress.length).toBeGreaterThan(1);
      expect(progress.at(-1)).toMatchObject({ blobsDone: 301, blobsTotal: 301 });
      const { rm } = await import('node:fs/promises');
      await rm(`${data}/teams/payments`, { recursive: true });
      const second = await publishTo(s3, p, data);
      expect(second.scopes).toEqual([
        { scope: 'account', status: 'unchanged', files: 300 },
        { scope: 'team_payments', status: 'removed', files: 0 },
      ]);
    } finally {
      await removeDataDir(data);
    }
  });

  it('a transient store failure is retried and the publish completes', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    try {
      let puts = 0;
      const result = await publishTo(s3, p, data, {
        concurrency: 1,
        wrap: (st) => {
          const c = countingStore(st);
          c.failWith = (op) => (op === 'put' && ++puts === 3 ? new ObjectStoreError('unreachable', 'PUT: cannot reach (test)') : null);
          return c;
        },
      });
      expect(result.changed).toBe(true);
      // 4 blobs, 2 indexes, directory.json, the history copy, the pointer, and the one retried.
      expect(puts).toBe(4 + 2 + 1 + 1 + 1 + 1);
      expect(parsePointer((await pointerBytes(p)) as Buffer)).toEqual(result.pointer);
    } finally {
      await removeDataDir(data);
    }
  });

  it('a stored blob no publication names is reused when recent, uploaded again when older than an hour (gc may be deleting it)', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    const { rm, utimes } = await import('node:fs/promises');
    const blobFile = join(s3.dir, s3.bucket, p, 'blobs', `${sha256Hex(Buffer.from('db v1\n'))}._S3rver_object`);
    try {
      await publishTo(s3, p, data);
      await rm(`${data}/teams/payments/runbooks/db.md`);
      await publishTo(s3, p, data);
      // Back, and its blob was written seconds ago: reused.
      await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v1\n');
      expect((await publishTo(s3, p, data)).uploaded.blobs).toBe(0);
      await rm(`${data}/teams/payments/runbooks/db.md`);
      await publishTo(s3, p, data);
      // Back again, but its blob is two hours old and nothing names it: uploaded again, and young once more.
      const old = new Date(Date.now() - 2 * 3_600_000);
      await utimes(blobFile, old, old);
      await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v1\n');
      expect((await publishTo(s3, p, data)).uploaded.blobs).toBe(1);
      expect(Date.now() - (await stat(blobFile)).mtimeMs).toBeLessThan(60_000);
    } finally {
      await removeDataDir(data);
    }
  });

  it('a failure that persists stops it before the pointer; the rerun reuses what was uploaded', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    try {
      await publishTo(s3, p, data);
      const before = await pointerBytes(p);
      for (let i = 0; i < 5; i++) await writeDataFile(data, `account/new-${i}.md`, `new ${i}\n`);
      let puts = 0;
      await expect(
        publishTo(s3, p, data, {
          concurrency: 1,
          wrap: (st) => {
            const c = countingStore(st);
            c.failWith = (op) => (op === 'put' && ++puts >= 3 ? new ObjectStoreError('unreachable', 'PUT: cannot reach (test)') : null);
            return c;
          },
        }),
      ).rejects.toThrow(/cannot reach \(test\)/);
      expect((await pointerBytes(p))?.equals(before as Buffer)).toBe(true);
      const rerun = await publishTo(s3, p, data);
      expect(rerun.changed).toBe(true);
      expect(rerun.uploaded.blobs).toBe(3);
      expect(rerun.scopes[0]).toMatchObject({ scope: 'account', status: 'changed', added: 5 });
    } finally {
      await removeDataDir(data);
    }
  });

  it('an invalid directory.json stops it before any request to the store', async () => {
    const p = prefix();
    const data = await makeDataDir({ ...spec, directoryJson: '{"teams": {"Bad Id": {}}}' });
    let counting: CountingStore | null = null;
    try {
      const err = await publishTo(s3, p, data, { wrap: (st) => (counting = countingStore(st)) }).catch((e: unknown) => e);
      expect((err as KnowledgeError).code).toBe('config');
      expect((err as Error).message).toMatch(/directory\.json: teams\."Bad Id": invalid team id/);
      expect((counting as unknown as CountingStore).total()).toBe(0);
    } finally {
      await removeDataDir(data);
    }
  });

  it('a file changed between scan and upload stops it before the pointer, naming the file', async () => {
    const p = prefix();
    const data = await makeDataDir(spec);
    try {
      const err = await publishTo(s3, p, data, {
        wrap: (st) => {
          const c = countingStore(st);
          let once = false;
          c.failWith = (op) => {
            if (op === 'list' || op === 'has') {
              if (!once) void writeDataFile(data, 'teams/payments/runbooks/db.md', 'db changed meanwhile\n');
              once = true;
            }
            return null;
          };
          return c;
        },
      }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/teams\/payments\/runbooks\/db\.md changed or vanished while publishing; nothing was switched/);
      expect(await pointerBytes(p)).toBeNull();
    } finally {
      await removeDataDir(data);
    }
  });
});
