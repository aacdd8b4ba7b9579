// BucketPackStore field by field, over a bucket in memory: what each poll of
// the pointer asks for and answers, every refusal of a malformed publication
// word for word (the previous one stays served, logged and counted once),
// what a new publication reuses from the one it replaces, the index load
// budget's two attempts, and what a read answers for each way a blob can be
// wrong. The same store over a real s3rver: store-serve, store-faults and
// store-index-budget.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KnowledgeError } from '../src/core/errors.js';
import { CONTROL_PLANE_METRICS as M, type MetricsRecorder } from '../src/core/metrics.js';
import { MAX_INDEX_BYTES, POINTER_KEY, blobKey, directoryKey, indexKey, parsePointer, serializePointer, type Pointer } from '../src/core/publication.js';
import { sha256Hex } from '../src/core/sha256.js';
import { ObjectStoreError, type GetOptions, type StoredObject } from '../src/store/objects/object-store.js';
import { BucketPackStore, REFUSED_RECHECK_POLLS, type BucketPackStoreOptions } from '../src/store/publication/bucket-pack-store.js';
import { publish } from '../src/store/publication/publish.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { MemoryBucket } from './helpers/memory-bucket.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search' },
  users: {},
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/search/DUTY.md': '# Search\n',
  },
};
const WHERE = 's3://memory/bucket';

/** A memory bucket that records every GET (its key and options), and can fail, delay or answer 304 to some. */
class WatchedBucket extends MemoryBucket {
  readonly gets: { key: string; options: GetOptions | undefined }[] = [];
  heads = 0;
  failGet: ((key: string, options: GetOptions | undefined) => Error | null) | null = null;
  delayGet: ((key: string) => number) | null = null;
  /** Answers 'not-modified' to these keys, asked with a condition or not (a broken store, or a proxy in front of it). */
  notModified: ((key: string) => boolean) | null = null;

  override async get(key: string, options?: GetOptions): Promise<StoredObject | null | 'not-modified'> {
    this.gets.push({ key, options });
    const err = this.failGet?.(key, options);
    if (err) throw err;
    const ms = this.delayGet?.(key) ?? 0;
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    if (this.notModified?.(key) === true) return 'not-modified';
    return super.get(key, options);
  }

  override async has(key: string): Promise<boolean> {
    this.heads++;
    return super.has(key);
  }

  keysGot(): string[] {
    return this.gets.splice(0).map((g) => g.key);
  }

  pointer(): Pointer {
    const o = this.objects.get(POINTER_KEY);
    if (o === undefined) throw new Error('no pointer');
    return parsePointer(o.bytes);
  }
}

let dir: string;
let bucket: WatchedBucket;
let lines: string[];
let counted: string[];

beforeEach(async () => {
  dir = await makeDataDir(spec);
  bucket = new WatchedBucket();
  lines = [];
  counted = [];
});
afterEach(async () => {
  await removeDataDir(dir);
});

/** Publishes the data directory, then forgets the requests publish made (it reads the previous publication too). */
async function publishNow() {
  const result = await publish({ dataDir: dir, store: bucket, maxFileSize: 1 << 20, log: () => undefined });
  bucket.gets.length = 0;
  bucket.heads = 0;
  return result;
}

function open(options: Partial<BucketPackStoreOptions> = {}): BucketPackStore {
  const metrics: MetricsRecorder = {
    inc: (spec, labels) => counted.push(`${spec.name} ${JSON.stringify(labels)}`),
    add: () => undefined,
    set: () => undefined,
    observe: () => undefined,
  };
  return new BucketPackStore({ store: bucket, maxFileSize: 1 << 20, cacheBytes: 1 << 20, log: (l) => lines.push(l), metrics, ...options });
}

const TAKEN = `${M.publications.name} {"result":"taken"}`;
const REFUSED = `${M.publications.name} {"result":"refused"}`;

/** A store serving the first publication, with the GETs of loading it forgotten. */
async function served(options: Partial<BucketPackStoreOptions> = {}): Promise<{ store: BucketPackStore; first: Pointer }> {
  const { pointer } = await publishNow();
  const store = open(options);
  expect(await store.refresh()).toBe('switched');
  bucket.gets.length = 0;
  bucket.heads = 0;
  counted.length = 0;
  return { store, first: pointer };
}

async function caught(p: Promise<unknown>): Promise<KnowledgeError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(KnowledgeError);
  return err as KnowledgeError;
}

describe('before any publication', () => {
  it('no pointer: refresh fails naming the store and what to run; nothing is served', async () => {
    const store = open();
    const err = await caught(store.refresh());
    expect(err.code).toBe('unavailable');
    expect(err.message).toBe(`${WHERE}: refusing the publication: ${POINTER_KEY}: missing: there is no publication (run knowledgefs publish --data DIR --store ...)`);
    const before = (() => {
      try {
        return store.directory;
      } catch (e) {
        return e;
      }
    })();
    expect(before).toBeInstanceOf(KnowledgeError);
    expect((before as KnowledgeError).code).toBe('unavailable');
    expect(store.pointer).toBeNull();
    expect(store.servedPointers).toEqual([]);
    expect(store.scopes()).toEqual([]);
    expect(store.snapshot('account')).toBeUndefined();
    expect(() => store.directory).toThrow(`${WHERE}: no publication loaded yet`);
    expect(await store.read('account', 'DUTY.md')).toBeNull();
    expect(counted).toEqual([]);
  });

  it('a malformed first pointer fails too; a good one after it is taken', async () => {
    bucket.set(POINTER_KEY, '{"format": 1');
    const store = open();
    const err = await caught(store.refresh());
    expect(err.message).toMatch(new RegExp(`^${WHERE}: refusing the publication: ${POINTER_KEY}: not valid JSON \\(`));
    await publishNow();
    expect(await store.refresh()).toBe('switched');
    expect(store.generation).toBe(1);
  });
});

describe('following the pointer', () => {
  it('takes a publication whole: every scope sorted, the directory, one count, and the pointer with no condition', async () => {
    const { pointer } = await publishNow();
    const store = open();
    // The account's index arrives last: the scopes are still listed account first.
    bucket.delayGet = (key) => (key.startsWith('indexes/account/') ? 30 : 0);
    expect(await store.refresh()).toBe('switched');
    expect(bucket.gets[0]).toEqual({ key: POINTER_KEY, options: { maxBytes: 4 * 1024 * 1024 } });
    expect(bucket.gets[1]).toEqual({ key: directoryKey(pointer.directory), options: { maxBytes: 64 * 1024 * 1024 } });
    expect(store.pointer).toEqual(pointer);
    expect(store.servedPointers).toEqual([pointer]);
    expect(store.scopes().map((s) => s.scope)).toEqual(Object.keys(pointer.scopes));
    expect(store.snapshot('team_payments')?.files.map((f) => f.path)).toEqual(['DUTY.md']);
    expect([...store.directory.teams.keys()]).toEqual(['payments', 'search']);
    expect(counted).toEqual([TAKEN]);
    expect(store.generation).toBe(1);
  });

  it('an unchanged pointer costs one conditional GET and answers unchanged', async () => {
    const { store } = await served();
    expect(await store.refresh()).toBe('unchanged');
    expect(bucket.gets).toHaveLength(1);
    expect(bucket.gets[0]?.options?.ifNoneMatch).toMatch(/^"[0-9a-f]{32}"$/);
    expect(store.generation).toBe(1);
    expect(counted).toEqual([]);
  });

  it('the same publication published again (a new time only) is unchanged, and its new etag is the one asked with after', async () => {
    const { store, first } = await served();
    const again: Pointer = { ...first, publishedAt: '2030-01-01T00:00:00.000Z' };
    bucket.set(POINTER_KEY, serializePointer(again));
    expect(await store.refresh()).toBe('unchanged');
    expect(bucket.keysGot()).toEqual([POINTER_KEY]);
    expect(store.pointer?.publishedAt).toBe('2030-01-01T00:00:00.000Z');
    expect(store.generation).toBe(1);
    expect(await store.refresh()).toBe('unchanged');
    expect(bucket.gets).toHaveLength(1);
  });

  it('a new publication reuses the directory and the unchanged indexes, and checks only the blobs it adds', async () => {
    const { store, first } = await served();
    const search = store.snapshot('team_search');
    await writeDataFile(dir, 'teams/payments/new.md', 'new\n');
    const { pointer } = await publishNow();
    expect(await store.refresh()).toBe('switched');
    expect(bucket.keysGot()).toEqual([POINTER_KEY, indexKey('team_payments', pointer.scopes['team_payments'] ?? '')]);
    expect(bucket.heads).toBe(1);
    expect(store.servedPointers).toEqual([pointer, first]);
    expect(store.generation).toBe(2);
    expect(counted).toEqual([TAKEN]);
    expect(store.snapshot('team_search')).toBe(search);
  });

  it('a store that cannot answer the pointer: the error is thrown as it came, nothing changes', async () => {
    const { store, first } = await served();
    const down = new ObjectStoreError('unreachable', 'connection refused');
    bucket.failGet = () => down;
    await expect(store.refresh()).rejects.toBe(down);
    bucket.failGet = null;
    expect(store.pointer).toEqual(first);
    expect(await store.refresh()).toBe('unchanged');
    expect(lines).toEqual([]);
  });

  it('a store that fails while a publication loads: thrown, not refused; taken once the store answers', async () => {
    const { store, first } = await served();
    await writeDataFile(dir, 'account/new.md', 'new\n');
    const { pointer } = await publishNow();
    bucket.failGet = (key) => (key.startsWith('indexes/') ? new ObjectStoreError('timeout', 'slow') : null);
    await expect(store.refresh()).rejects.toThrow('slow');
    expect(store.pointer).toEqual(first);
    bucket.failGet = null;
    expect(await store.refresh()).toBe('switched');
    expect(store.pointer).toEqual(pointer);
    expect(lines).toEqual([]);
  });

  it('refreshes run one at a time, and one that fails does not stop the next', async () => {
    const { store } = await served();
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const get = bucket.get.bind(bucket);
    let calls = 0;
    bucket.get = async (key, options) => {
      if (++calls === 1) {
        await gate;
        throw new ObjectStoreError('unreachable', 'down');
      }
      return get(key, options);
    };
    const failing = store.refresh();
    const after = store.refresh();
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toBe(1);
    release();
    await expect(failing).rejects.toThrow('down');
    expect(await after).toBe('unchanged');
    expect(calls).toBe(2);
  });
});

describe('a refused publication', () => {
  /** Publishes a change, then breaks it with `tamper`; the refresh that finds it is refused. */
  async function refusedWith(tamper: (pointer: Pointer) => void, options: Partial<BucketPackStoreOptions> = {}) {
    const { store, first } = await served(options);
    await writeDataFile(dir, 'teams/payments/new.md', 'new\n');
    await removeDataFile(dir, 'teams/search/DUTY.md');
    await writeDataFile(dir, 'teams/search/other.md', 'other\n');
    await writeDirectory(dir, { ...spec, teams: { payments: 'Pay', search: 'Search' } });
    const { pointer } = await publishNow();
    tamper(pointer);
    bucket.gets.length = 0;
    expect(await store.refresh()).toBe('refused');
    expect(store.pointer).toEqual(first);
    expect(store.servedPointers).toEqual([first]);
    expect(store.generation).toBe(1);
    expect(counted).toEqual([REFUSED]);
    expect(lines).toHaveLength(1);
    return { store, first, pointer, line: lines[0] ?? '' };
  }

  const still = (first: Pointer) => `; still serving the one published ${first.publishedAt}`;

  it('a missing directory.json', async () => {
    const { line, pointer, first } = await refusedWith((p) => bucket.objects.delete(directoryKey(p.directory)));
    expect(line).toBe(`${WHERE}: refusing the publication: ${directoryKey(pointer.directory)}: missing (named by ${POINTER_KEY})${still(first)}`);
  });

  it('a directory.json that does not hash to its name', async () => {
    const { line, pointer } = await refusedWith((p) => bucket.set(directoryKey(p.directory), '{"teams":[],"users":[]}'));
    expect(line).toContain(`: ${directoryKey(pointer.directory)}: does not hash to its name;`);
  });

  it('a directory.json that hashes to its name but is not JSON', async () => {
    const bad = Buffer.from('{"teams": [');
    const { line } = await refusedWith((p) => {
      bucket.set(directoryKey(sha256Hex(bad)), bad);
      bucket.set(POINTER_KEY, serializePointer({ ...p, directory: sha256Hex(bad) }));
    });
    expect(line).toMatch(new RegExp(`: ${directoryKey(sha256Hex(bad))}: not valid JSON \\([^)]+\\);`));
  });

  it('a directory.json that hashes to its name but is not a directory: its problem, the key named once', async () => {
    await publishNow();
    const wrong = Buffer.from('{"teams": 3, "users": []}');
    const key = directoryKey(sha256Hex(wrong));
    bucket.set(key, wrong);
    bucket.set(POINTER_KEY, serializePointer({ ...bucket.pointer(), directory: sha256Hex(wrong) }));
    const err = await caught(open().refresh());
    expect(err.message).toBe(`${WHERE}: refusing the publication: ${key}: teams: expected an object mapping team id to {"name": ...}`);
  });

  it('a missing index', async () => {
    const { line, pointer } = await refusedWith((p) => bucket.objects.delete(indexKey('team_payments', p.scopes['team_payments'] ?? '')));
    expect(line).toContain(`: ${indexKey('team_payments', pointer.scopes['team_payments'] ?? '')}: missing (named by ${POINTER_KEY});`);
  });

  it('a missing blob, named by the first file whose blob it is', async () => {
    const { line } = await refusedWith(() => bucket.objects.delete(blobKey(sha256Hex('other\n'))));
    expect(line).toContain(`: ${blobKey(sha256Hex('other\n'))}: missing (the blob of team_search/other.md);`);
  });

  it('a pointer to nothing is refused every poll, logged and counted once, and asked for with the current etag', async () => {
    const { store } = await served();
    bucket.objects.delete(POINTER_KEY);
    for (let i = 0; i < 3; i++) expect(await store.refresh()).toBe('refused');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^${WHERE}: refusing the publication: ${POINTER_KEY}: missing: there is no publication`));
    expect(counted).toEqual([REFUSED]);
    expect(bucket.gets.every((g) => g.options?.ifNoneMatch !== undefined)).toBe(true);
    await publishNow();
    expect(await store.refresh()).toBe('unchanged');
  });

  it('a refused pointer is not read again while its etag stands, except in full every tenth poll', async () => {
    const { store } = await refusedWith((p) => bucket.objects.delete(directoryKey(p.directory)));
    const refusedEtag = ((await bucket.get(POINTER_KEY)) as StoredObject).etag;
    bucket.gets.length = 0;
    for (let poll = 1; poll <= 2 * REFUSED_RECHECK_POLLS; poll++) expect(await store.refresh()).toBe('refused');
    const asked = bucket.gets.map((g) => g.options?.ifNoneMatch);
    expect(asked.flatMap((etag, i) => (etag === undefined ? [i + 1] : []))).toEqual([REFUSED_RECHECK_POLLS, 2 * REFUSED_RECHECK_POLLS]);
    expect(asked.filter((e) => e !== undefined).every((e) => e === refusedEtag)).toBe(true);
    // Read in full, the same bytes are refused again without loading anything.
    expect(bucket.gets.every((g) => g.key === POINTER_KEY)).toBe(true);
    expect(lines).toHaveLength(1);
    expect(counted).toEqual([REFUSED]);
  });

  it('a refused pointer torn once, then whole under the same etag, is taken at the tenth poll', async () => {
    const { store } = await served();
    await writeDataFile(dir, 'account/new.md', 'new\n');
    const { pointer } = await publishNow();
    const whole = bucket.objects.get(POINTER_KEY)?.bytes ?? Buffer.alloc(0);
    // What a store that is not atomic can answer once: the new etag, a cut body.
    let torn = true;
    const get = bucket.get.bind(bucket);
    bucket.get = async (key, options) => {
      const got = await get(key, options);
      if (key !== POINTER_KEY || !torn || got === null || got === 'not-modified') return got;
      torn = false;
      return { ...got, bytes: whole.subarray(0, 20) };
    };
    expect(await store.refresh()).toBe('refused');
    let polls = 1;
    while ((await store.refresh()) === 'refused') polls++;
    expect(polls).toBe(REFUSED_RECHECK_POLLS);
    expect(store.pointer).toEqual(pointer);
    // Taken: the refusal is forgotten, and the next poll asks with the new etag.
    bucket.gets.length = 0;
    expect(await store.refresh()).toBe('unchanged');
    expect(bucket.gets).toHaveLength(1);
  });

  it('a refused pointer that then vanishes is refused too, and logged', async () => {
    const { store } = await refusedWith((p) => bucket.objects.delete(directoryKey(p.directory)));
    bucket.objects.delete(POINTER_KEY);
    expect(await store.refresh()).toBe('refused');
    expect(lines.at(-1)).toMatch(new RegExp(`^${WHERE}: refusing the publication: ${POINTER_KEY}: missing: there is no publication`));
  });

  it('a 304 to an unconditional GET of a directory or an index is that object missing', async () => {
    const { pointer } = await publishNow();
    bucket.notModified = (key) => key === directoryKey(pointer.directory);
    expect((await caught(open().refresh())).message).toBe(`${WHERE}: refusing the publication: ${directoryKey(pointer.directory)}: missing (named by ${POINTER_KEY})`);
    const account = indexKey('account', pointer.scopes['account'] ?? '');
    bucket.notModified = (key) => key === account;
    expect((await caught(open().refresh())).message).toBe(`${WHERE}: refusing the publication: ${account}: missing (named by ${POINTER_KEY})`);
  });

  it('a new pointer after a refused one is read at once and taken', async () => {
    const { store } = await refusedWith((p) => bucket.objects.delete(directoryKey(p.directory)));
    await writeDataFile(dir, 'account/later.md', 'later\n');
    bucket.objects.delete(POINTER_KEY);
    const { pointer } = await publishNow();
    counted.length = 0;
    expect(await store.refresh()).toBe('switched');
    expect(store.pointer).toEqual(pointer);
    expect(counted).toEqual([TAKEN]);
  });
});

describe('the index load budget', () => {
  const BUDGET = 16 * 64;

  it('an index over its share of the budget is asked for again with the largest reservation, and taken', async () => {
    await writeDataFile(dir, 'teams/payments/long.md', 'x\n');
    const { pointer } = await publishNow();
    const store = open({ indexLoadBudgetBytes: BUDGET });
    expect(await store.refresh()).toBe('switched');
    const key = indexKey('team_payments', pointer.scopes['team_payments'] ?? '');
    expect(bucket.gets.filter((g) => g.key === key).map((g) => g.options?.maxBytes)).toEqual([64, BUDGET]);
    expect(store.pointer).toEqual(pointer);
  });

  it('an index over the whole budget is refused, naming the budget', async () => {
    const { pointer } = await publishNow();
    const store = open({ indexLoadBudgetBytes: 100 });
    const err = await caught(store.refresh());
    const account = indexKey('account', pointer.scopes['account'] ?? '');
    const payments = indexKey('team_payments', pointer.scopes['team_payments'] ?? '');
    expect([account, payments, indexKey('team_search', pointer.scopes['team_search'] ?? '')].some((k) => err.message === `${WHERE}: refusing the publication: ${k}: larger than 100 B, the index load budget`)).toBe(true);
  });

  it('with a budget as large as the largest index, over it names that limit; a budget of 16 such asks once', async () => {
    await publishNow();
    bucket.failGet = (key, options) => (key.startsWith('indexes/') ? new ObjectStoreError('too_large', `more than ${options?.maxBytes}`) : null);
    const one = open({ indexLoadBudgetBytes: MAX_INDEX_BYTES });
    const err = await caught(one.refresh());
    expect(err.message).toMatch(/: indexes\/\S+\.json: larger than 256.0 MiB, the largest index a replica accepts$/);
    bucket.gets.length = 0;
    const wide = open({ indexLoadBudgetBytes: 16 * MAX_INDEX_BYTES });
    await caught(wide.refresh());
    const asked = bucket.gets.filter((g) => g.key.startsWith('indexes/'));
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((g) => g.options?.maxBytes === MAX_INDEX_BYTES)).toBe(true);
    expect(new Set(asked.map((g) => g.key)).size).toBe(asked.length);
  });

  it('other errors of an index GET are not turned into a size refusal, nor asked for again', async () => {
    await publishNow();
    const down = new ObjectStoreError('unreachable', 'reset');
    bucket.failGet = (key) => (key.startsWith('indexes/') ? down : null);
    await expect(open({ indexLoadBudgetBytes: BUDGET }).refresh()).rejects.toBe(down);
    const asked = bucket.gets.filter((g) => g.key.startsWith('indexes/')).map((g) => g.key);
    expect(asked).toHaveLength(3);
    expect(new Set(asked).size).toBe(3);
  });

  it('a publication whose indexes total more than the cap is refused, counting the indexes it reuses', async () => {
    const { pointer } = await publishNow();
    const sizes = Object.entries(pointer.scopes).map(([s, v]) => bucket.objects.get(indexKey(s, v))?.bytes.length ?? 0);
    const total = sizes.reduce((a, b) => a + b, 0);
    expect(await open({ maxPublicationIndexBytes: total }).refresh()).toBe('switched');
    const err = await caught(open({ maxPublicationIndexBytes: total - 1 }).refresh());
    expect(err.message).toMatch(new RegExp(`: indexes/\\S+\\.json: the publication's indexes total more than ${total - 1} B, the most a replica holds for them$`));

    // Held indexes count too: a change to one scope that takes the total over the cap is refused.
    const store = open({ maxPublicationIndexBytes: total + 10 });
    expect(await store.refresh()).toBe('switched');
    await writeDataFile(dir, 'account/a-rather-long-file-name-that-grows-the-index.md', 'x\n');
    await publishNow();
    expect(await store.refresh()).toBe('refused');
    expect(lines.at(-1)).toContain("the publication's indexes total more than");
  });
});

describe('reads', () => {
  it('serves verified bytes with the index\'s size and time, counting misses then hits', async () => {
    const { store } = await served();
    const file = await store.read('account', 'DUTY.md');
    expect(file?.bytes.toString()).toBe('# Account\n');
    expect(file?.sha256).toBe(sha256Hex('# Account\n'));
    expect(file?.size).toBe(10);
    expect(file?.mtimeMs).toBe(store.snapshot('account')?.files[0]?.mtimeMs);
    expect(store.cacheCounts()).toEqual({ hits: 0, misses: 1 });
    await store.read('account', 'DUTY.md');
    expect(store.cacheCounts()).toEqual({ hits: 1, misses: 1 });
    expect(bucket.gets.map((g) => g.options)).toEqual([{ maxBytes: 10 }]);
    expect(await store.read('account', 'nope.md')).toBeNull();
    expect(await store.read('team_nope', 'DUTY.md')).toBeNull();
  });

  it('readSmallSync answers only from memory: null for no such file, undefined until read', async () => {
    const { store } = await served();
    expect(store.readSmallSync('account', 'nope.md')).toBeNull();
    expect(store.readSmallSync('account', 'DUTY.md')).toBeUndefined();
    await store.read('account', 'DUTY.md');
    const sync = store.readSmallSync('account', 'DUTY.md');
    expect(sync?.bytes.toString()).toBe('# Account\n');
    expect([sync?.sha256, sync?.size, sync?.mtimeMs]).toEqual([sha256Hex('# Account\n'), 10, store.snapshot('account')?.files[0]?.mtimeMs]);
    expect(store.cacheCounts().hits).toBe(1);
  });

  it('the previous publication\'s version when it is the one named; the current one otherwise; a removed path not at all', async () => {
    const { store } = await served();
    const v1 = sha256Hex('# Account\n');
    await writeDataFile(dir, 'account/DUTY.md', '# Account v2\n');
    await writeDataFile(dir, 'account/gone.md', 'gone\n');
    await publishNow();
    await store.refresh();
    expect((await store.read('account', 'DUTY.md', v1))?.bytes.toString()).toBe('# Account\n');
    expect((await store.read('account', 'DUTY.md', sha256Hex('older')))?.bytes.toString()).toBe('# Account v2\n');
    expect((await store.read('account', 'DUTY.md'))?.bytes.toString()).toBe('# Account v2\n');
    await removeDataFile(dir, 'account/gone.md');
    await publishNow();
    await store.refresh();
    expect(await store.read('account', 'gone.md', sha256Hex('gone\n'))).toBeNull();
    // Two publications on, the first one's version is no longer served.
    expect((await store.read('account', 'DUTY.md', v1))?.bytes.toString()).toBe('# Account v2\n');
  });

  it('a blob deleted after it was published is unavailable, naming it; so is a 304 to its GET', async () => {
    const { store } = await served();
    const key = blobKey(sha256Hex('# Account\n'));
    const missing = `${WHERE}: ${key} is missing (deleted after it was published?)`;
    bucket.notModified = (k) => k === key;
    let err = await caught(store.read('account', 'DUTY.md'));
    expect([err.code, err.message]).toEqual(['unavailable', missing]);
    bucket.notModified = null;
    bucket.objects.delete(key);
    err = await caught(store.read('account', 'DUTY.md'));
    expect([err.code, err.message]).toEqual(['unavailable', missing]);
    expect(lines).toEqual([]);
  });

  it('a store that fails a blob GET: its error as it came, not an integrity error', async () => {
    const { store } = await served();
    const down = new ObjectStoreError('unreachable', 'connection reset');
    bucket.failGet = () => down;
    await expect(store.read('account', 'DUTY.md')).rejects.toBe(down);
    bucket.failGet = () => new Error('not a store error');
    await expect(store.read('account', 'DUTY.md')).rejects.toThrow('not a store error');
    expect(lines).toEqual([]);
  });

  it('a file whose bytes did not change keeps the current publication\'s time when its version is named', async () => {
    const { store } = await served();
    const sha = sha256Hex('# Account\n');
    const { utimes } = await import('node:fs/promises');
    await utimes(join(dir, 'account/DUTY.md'), new Date(2_000_000_000_000), new Date(2_000_000_000_000));
    await writeDataFile(dir, 'account/other.md', 'a new version of the scope\n');
    await publishNow();
    expect(await store.refresh()).toBe('switched');
    expect((await store.read('account', 'DUTY.md', sha))?.mtimeMs).toBe(2_000_000_000_000);
  });

  it('a blob of another length, longer than its index says, or hashing to something else: integrity, never served, logged once', async () => {
    const { store } = await served();
    const sha = sha256Hex('# Account\n');
    bucket.set(blobKey(sha), '# Accoun\n');
    let err = await caught(store.read('account', 'DUTY.md'));
    expect([err.code, err.message]).toEqual(['integrity', `${WHERE}: ${blobKey(sha)} is corrupt (9 bytes, its index says 10); not served`]);
    bucket.set(blobKey(sha), '# Account!!\n');
    err = await caught(store.read('account', 'DUTY.md'));
    expect(err.message).toBe(`${WHERE}: ${blobKey(sha)} is corrupt (larger than the 10 bytes its index says); not served`);
    bucket.set(blobKey(sha), '# Accounx\n');
    err = await caught(store.read('account', 'DUTY.md'));
    expect(err.message).toBe(`${WHERE}: ${blobKey(sha)} is corrupt (hashes to ${sha256Hex('# Accounx\n')}); not served`);
    await caught(store.read('account', 'DUTY.md'));
    // The first problem again, after others: still logged once (the log's memory is not cleared by each new line).
    bucket.set(blobKey(sha), '# Accoun\n');
    await caught(store.read('account', 'DUTY.md'));
    expect(lines).toEqual([
      `${WHERE}: ${blobKey(sha)} is corrupt (9 bytes, its index says 10); not served`,
      `${WHERE}: ${blobKey(sha)} is corrupt (larger than the 10 bytes its index says); not served`,
      `${WHERE}: ${blobKey(sha)} is corrupt (hashes to ${sha256Hex('# Accounx\n')}); not served`,
    ]);
  });

  describe('with a disk cache', () => {
    let cacheDir: string;
    beforeEach(async () => {
      cacheDir = join(await mkdtemp(join(tmpdir(), 'kfs-bps-')), 'cache');
    });
    afterEach(async () => {
      // Spills are written behind the reads: let the last ones land, and retry a removal one still races.
      await new Promise((r) => setTimeout(r, 50));
      await rm(join(cacheDir, '..'), { recursive: true, force: true, maxRetries: 5 });
    });

    /** Reads both team duties twice with room in memory for neither; the blob GETs it took. */
    async function blobGetsWith(options: Partial<BucketPackStoreOptions>): Promise<number> {
      const { store } = await served({ cacheBytes: 1, cacheDir, ...options });
      for (let round = 0; round < 2; round++) {
        for (const scope of ['team_payments', 'team_search']) {
          await store.read(scope, 'DUTY.md');
          await new Promise((r) => setTimeout(r, 50)); // the spill to disk is written behind the read
        }
      }
      return bucket.gets.filter((g) => g.key.startsWith('blobs/')).length;
    }

    it('blobs too large for memory are kept on disk, within --blob-cache-disk-bytes', async () => {
      expect(await blobGetsWith({})).toBe(2);
      await rm(cacheDir, { recursive: true });
      // Room on disk for one 11-byte blob at a time: each read evicts the other.
      expect(await blobGetsWith({ cacheDiskBytes: 12 })).toBe(4);
    });

    it('a disk copy that hashes to something else is logged, dropped and fetched again', async () => {
      const { store } = await served({ cacheBytes: 1, cacheDir });
      await store.read('account', 'DUTY.md');
      await new Promise((r) => setTimeout(r, 50));
      const { writeFile } = await import('node:fs/promises');
      await writeFile(join(cacheDir, sha256Hex('# Account\n')), '# Accounx\n');
      expect((await store.read('account', 'DUTY.md'))?.bytes.toString()).toBe('# Account\n');
      expect(lines).toEqual([`${WHERE}: ${blobKey(sha256Hex('# Account\n'))} is corrupt (cached copy on disk hashes to ${sha256Hex('# Accounx\n')}); not served`]);
    });
  });
});
