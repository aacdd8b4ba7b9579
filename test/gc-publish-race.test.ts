// `gc --delete` and `publish` at once, against a real S3-protocol server
// (s3rver) with a proxy in front of one of them that holds every request of
// one kind (list, GET, HEAD, PUT, DeleteObjects) while the other runs, then
// lets them through: the network delaying a request, at the worst moment.
//
// The bucket holds three publications whose objects are all older than the
// grace; the publish then goes back to the first one's content, so it names
// a blob, an index and a directory.json that exist, that no root names, and
// that gc has every reason to delete. Whatever is held, the publication the
// publish leaves current must be whole afterwards: a new replica takes it.
// The orderings themselves are proved exhaustively in gc-publish-model.test.ts.

import { readdir, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pointer } from '../src/core/publication.js';
import { collectGarbage, type GcResult } from '../src/store/gc/gc.js';
import { S3ObjectStore } from '../src/store/objects/s3-object-store.js';
import { resolveS3Config } from '../src/store/objects/store-config.js';
import { BucketPackStore } from '../src/store/publication/bucket-pack-store.js';
import { publish, type PublishResult } from '../src/store/publication/publish.js';
import { s3Store } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const HOUR = 3_600_000;
const GRACE = 2 * HOUR;

const spec = (teamName: string): DataDirSpec => ({
  teams: { payments: teamName },
  users: { alice: { teams: ['payments'] } },
  files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n', 'teams/payments/db.md': 'db v1\n' },
});

type Kind = 'list' | 'get' | 'head' | 'put' | 'delete';

/** Which S3 request a `METHOD url` is. */
function kindOf(method: string, url: string): Kind | null {
  if (method === 'POST' && /[?&]delete/.test(url)) return 'delete';
  if (method === 'GET') return /[?&]list-type=2/.test(url) ? 'list' : 'get';
  if (method === 'HEAD') return 'head';
  if (method === 'PUT') return 'put';
  return null;
}

let s3: TestS3;
let n = 0;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});

/** Sets every object under the prefix to have been written `ms` ago (s3rver's LastModified is the file's mtime). */
async function age(prefix: string, ms: number): Promise<void> {
  const when = new Date(Date.now() - ms);
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.name.endsWith('._S3rver_object')) await utimes(path, when, when);
    }
  };
  await walk(join(s3.dir, s3.bucket, prefix));
}

async function until(done: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
}

function storeAt(prefix: string, endpoint: string): S3ObjectStore {
  return new S3ObjectStore(resolveS3Config({ store: `s3://${s3.bucket}/${prefix}`, endpoint, timeoutMs: 30_000, env: s3.env }));
}

/** Whether a fresh replica takes the current publication, and which one it is. */
async function replicaTakes(prefix: string): Promise<{ outcome: string; pointer: Pointer | null; logs: string[] }> {
  const store = s3Store(s3, prefix);
  const logs: string[] = [];
  try {
    const packs = new BucketPackStore({ store, maxFileSize: 1 << 20, cacheBytes: 1 << 20, log: (l) => logs.push(l) });
    const outcome = await packs.refresh().then(String, (err: Error) => `error: ${err.message}`);
    return { outcome, pointer: (packs as unknown as { current: { pointer: Pointer } | null }).current?.pointer ?? null, logs };
  } finally {
    await store.close();
  }
}

interface Race {
  readonly prefix: string;
  readonly data: string;
  readonly proxy: FaultProxy;
}

/** Three publications, all three hours old; the data dir then back at the first one's content. */
async function setUp(): Promise<Race> {
  const prefix = `race${++n}`;
  const data = await makeDataDir(spec('Payments (first)'));
  const direct = s3Store(s3, prefix);
  try {
    for (const v of [1, 2, 3]) {
      await writeDataFile(data, 'teams/payments/db.md', `db v${v}\n`);
      if (v === 2) await writeDirectory(data, spec('Payments'));
      await publish({ dataDir: data, store: direct, maxFileSize: 1 << 20, log: () => undefined });
    }
  } finally {
    await direct.close();
  }
  await age(prefix, 3 * HOUR);
  await writeDataFile(data, 'teams/payments/db.md', 'db v1\n');
  await writeDirectory(data, spec('Payments (first)'));
  return { prefix, data, proxy: await startFaultProxy(s3.endpoint) };
}

const runGc = (store: S3ObjectStore): Promise<GcResult> =>
  collectGarbage({ store, keep: 1, graceMs: GRACE, delete: true, served: [], log: () => undefined });

const runPublish = (store: S3ObjectStore, data: string, log: string[]): Promise<PublishResult> =>
  publish({ dataDir: data, store, maxFileSize: 1 << 20, log: (l) => log.push(l), gcPollMs: 20 } as Parameters<typeof publish>[0]);

async function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: string }> {
  return p.then((value) => ({ value }), (err: Error) => ({ error: err.message }));
}

/** gc's requests of one kind held while a publish runs, then let through. */
async function gcHeld(kind: Kind): Promise<void> {
  const { prefix, data, proxy } = await setUp();
  const viaProxy = storeAt(prefix, proxy.url);
  const direct = s3Store(s3, prefix);
  try {
    proxy.setRules([{ mode: { kind: 'hold' }, match: (m, u) => kindOf(m, u) === kind }]);
    let gcDone = false;
    const gc = settle(runGc(viaProxy)).finally(() => (gcDone = true));
    await until(() => proxy.holding > 0 || gcDone, 10_000);
    const log: string[] = [];
    let published = false;
    const pub = settle(runPublish(direct, data, log)).finally(() => (published = true));
    // A publish either ends, or waits for the gc it saw deleting.
    await until(() => published || log.some((l) => l.includes('waiting')), 10_000);
    proxy.release();
    const [g, p] = await Promise.all([gc, pub]);
    expect(g.error).toBeUndefined();
    expect(p.error).toBeUndefined();
    const replica = await replicaTakes(prefix);
    expect(replica.outcome, replica.logs.join('\n')).toBe('switched');
    expect(replica.pointer).toEqual(p.value?.pointer);
  } finally {
    proxy.release();
    await proxy.close();
    await viaProxy.close();
    await direct.close();
    await removeDataDir(data);
  }
}

/** publish's requests matching `match` held while a whole gc --delete runs, then let through. */
async function publishHeld(match: (method: string, url: string) => boolean): Promise<void> {
  const { prefix, data, proxy } = await setUp();
  const viaProxy = storeAt(prefix, proxy.url);
  const direct = s3Store(s3, prefix);
  try {
    proxy.setRules([{ mode: { kind: 'hold' }, match }]);
    const log: string[] = [];
    let published = false;
    const pub = settle(runPublish(viaProxy, data, log)).finally(() => (published = true));
    await until(() => proxy.holding > 0 || published, 10_000);
    const g = await settle(runGc(direct));
    expect(g.error).toBeUndefined();
    proxy.release();
    const p = await pub;
    expect(p.error).toBeUndefined();
    const replica = await replicaTakes(prefix);
    expect(replica.outcome, replica.logs.join('\n')).toBe('switched');
    expect(replica.pointer).toEqual(p.value?.pointer);
  } finally {
    proxy.release();
    await proxy.close();
    await viaProxy.close();
    await direct.close();
    await removeDataDir(data);
  }
}

describe('gc --delete and publish at once, one request kind held', () => {
  it("gc's listing held while a publish reuses what gc listed as garbage: the publication stays whole", () => gcHeld('list'));
  it("gc's GETs held while a publish reuses what gc listed as garbage: the publication stays whole", () => gcHeld('get'));
  it("gc's HEADs held while a publish reuses what gc listed as garbage: the publication stays whole", () => gcHeld('head'));
  it("gc's PUTs held while a publish reuses what gc listed as garbage: the publication stays whole", () => gcHeld('put'));
  it("gc's DeleteObjects held while a publish reuses what gc listed as garbage: the publication stays whole", () => gcHeld('delete'));
  it("publish's listing held while a whole gc --delete runs: the publication stays whole", () => publishHeld((m, u) => kindOf(m, u) === 'list'));
  it("publish's GETs held while a whole gc --delete runs: the publication stays whole", () => publishHeld((m, u) => kindOf(m, u) === 'get'));
  it("publish's HEADs held while a whole gc --delete runs: the publication stays whole", () => publishHeld((m, u) => kindOf(m, u) === 'head'));
  it("publish's PUTs held while a whole gc --delete runs: the publication stays whole", () => publishHeld((m, u) => kindOf(m, u) === 'put'));
  // Past its last look at the fence: the history copy, then the pointer.
  it("publish's history PUT held while a whole gc --delete runs: the publication stays whole", () => publishHeld((m, u) => m === 'PUT' && u.includes('/publications/')));
});
