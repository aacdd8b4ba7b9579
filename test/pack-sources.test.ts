// The two pack sources in this process, with the control plane's hooks
// recorded: a data directory (its start-up checks, what a watched change
// rescans, the fallback when the watch fails, a failing rescan) and a
// publication in an in-memory bucket (the first one required, new ones
// followed by polling, an outage said once and its end once).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { POINTER_KEY } from '../src/core/publication.js';
import { resolveOptions, type ControlPlaneOptions } from '../src/server/options.js';
import { openBucketPackSource } from '../src/server/packs/bucket-pack-source.js';
import { openDirPackSource } from '../src/server/packs/dir-pack-source.js';
import type { PackSource, SourceHooks } from '../src/server/packs/pack-source.js';
import { NO_METRICS } from '../src/core/metrics.js';
import { ObjectStoreError } from '../src/store/objects/object-store.js';
import { publish } from '../src/store/publication/publish.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { fakeWatch } from './helpers/fake-watch.js';
import { MemoryBucket } from './helpers/memory-bucket.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments' },
  users: { alice: { teams: ['payments'] } },
  files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n', 'teams/payments/runbooks/db.md': 'db\n' },
};

let dir: string;
let log: string[];
let source: PackSource | undefined;

beforeEach(async () => {
  dir = await makeDataDir(spec);
  log = [];
});
afterEach(async () => {
  await source?.close();
  source = undefined;
  await removeDataDir(dir);
});

/** The control plane's options over the data directory (the bucket source reads only its poll and cache ones). */
function optionsOf(extra: Partial<ControlPlaneOptions> = {}) {
  return resolveOptions({ dataDir: dir, adminToken: 'a'.repeat(32), log: (line) => log.push(line), ...extra });
}

/** Hooks that record each timed scan's kind and outcome, and each change. */
function recordingHooks(fail?: () => Error | undefined) {
  const scans: string[] = [];
  let changes = 0;
  const hooks: SourceHooks = {
    async timedScan(kind, run) {
      const err = fail?.();
      if (err !== undefined) throw err;
      const changed = await run();
      scans.push(`${kind}${changed ? ' changed' : ''}`);
      return changed;
    },
    changed: () => void changes++,
    metrics: NO_METRICS,
  };
  return { hooks, scans, changes: () => changes };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition never held');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('openDirPackSource', () => {
  it('--data must be a directory holding a valid directory.json', async () => {
    const { hooks } = recordingHooks();
    await expect(openDirPackSource({ ...optionsOf(), dataDir: join(dir, 'missing') }, hooks)).rejects.toMatchObject({ code: 'config', message: `--data ${join(dir, 'missing')}: not a directory` });
    await expect(openDirPackSource({ ...optionsOf(), dataDir: join(dir, 'directory.json') }, hooks)).rejects.toMatchObject({ code: 'config', message: expect.stringContaining('not a directory') });
    await writeFile(join(dir, 'directory.json'), '{"teams": 1}');
    await expect(openDirPackSource({ ...optionsOf(), dataDir: dir }, hooks)).rejects.toMatchObject({ code: 'config', message: expect.stringContaining('directory.json: teams:') });
  });

  it('starts with one full scan done, the watch on every directory it walked, and says how it keeps current', async () => {
    const fake = fakeWatch();
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf({ watchScanIntervalMs: 45_000 }), dataDir: dir }, rec.hooks, fake.watch);
    expect(rec.scans).toEqual(['full changed']);
    expect(source.store.scopes().map((s) => s.scope)).toEqual(['account', 'team_payments']);
    expect([...source.directory.directory.teams.keys()]).toEqual(['payments']);
    expect(fake.open().sort()).toEqual([dir, join(dir, 'account'), join(dir, 'teams'), join(dir, 'teams/payments'), join(dir, 'teams/payments/runbooks')].sort());
    expect(source.watch?.healthy).toBe(true);
    expect(source.describe()).toEqual({ what: dir, upkeep: 'watching 5 directories, full rescan every 45s' });
    expect(log).toEqual([]);
  });

  it('--watch off: no watch, a full rescan every --scan-interval', async () => {
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf({ watch: false, scanIntervalMs: 2500 }), dataDir: dir }, rec.hooks);
    expect(source.watch).toBeNull();
    expect(source.describe().upkeep).toBe('full rescan every 2500ms');
  });

  it('a watched change rescans only its directory, then tells the control plane', async () => {
    const fake = fakeWatch();
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf(), dataDir: dir }, rec.hooks, fake.watch);
    await writeDataFile(dir, 'teams/payments/runbooks/new.md', 'new\n');
    fake.fire(join(dir, 'teams/payments/runbooks'), 'new.md');
    await until(() => rec.changes() === 1);
    expect(rec.scans).toEqual(['full changed', 'partial changed']);
    expect(source.store.snapshot('team_payments')?.files.map((f) => f.path)).toContain('runbooks/new.md');
    // An event that changes nothing is scanned and not told.
    fake.fire(join(dir, 'teams/payments/runbooks'), 'new.md');
    await until(() => rec.scans.length === 3);
    expect(rec.scans[2]).toBe('partial');
    expect(rec.changes()).toBe(1);
  });

  it('a directory.json edit is taken without scanning packs', async () => {
    const fake = fakeWatch();
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf(), dataDir: dir }, rec.hooks, fake.watch);
    await writeFile(join(dir, 'directory.json'), JSON.stringify({ teams: { payments: { name: 'P' }, ops: { name: 'Ops' } }, users: {} }));
    fake.fire(dir, 'directory.json');
    await until(() => rec.changes() === 1);
    expect(rec.scans).toEqual(['full changed']);
    expect([...source.directory.directory.teams.keys()]).toEqual(['payments', 'ops']);
  });

  it('refresh() rescans everything now and tells the control plane when something changed', async () => {
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf({ watch: false, scanIntervalMs: 3_600_000 }), dataDir: dir }, rec.hooks);
    await source.refresh();
    expect(rec.scans).toEqual(['full changed', 'full']);
    expect(rec.changes()).toBe(0);
    await writeDataFile(dir, 'account/new.md', 'n\n');
    await source.refresh();
    expect(rec.scans).toEqual(['full changed', 'full', 'full changed']);
    expect(rec.changes()).toBe(1);
    // directory.json alone changing is a change too.
    await writeFile(join(dir, 'directory.json'), JSON.stringify({ teams: {}, users: {} }));
    await source.refresh();
    expect(rec.changes()).toBe(2);
  });

  it('a watch that fails while serving: one log line, everything rescanned at once, then every --scan-interval', async () => {
    const fake = fakeWatch();
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf({ scanIntervalMs: 200, watchScanIntervalMs: 3_600_000 }), dataDir: dir }, rec.hooks, fake.watch);
    fake.placed[0]?.emit('error', Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }));
    expect(log).toEqual([`watching ${dir} stopped: watch of ${dir} failed: EIO: i/o error; rescanning everything every 200ms (--scan-interval) instead`]);
    expect(source.describe().upkeep).toBe('full rescan every 200ms');
    await until(() => rec.scans.length >= 2, 1000); // at once (the debounce), not after an hour
    await until(() => rec.scans.length >= 3, 2000); // and again at the short interval
    expect(rec.scans.every((s) => s.startsWith('full'))).toBe(true);
  });

  it('a watch that cannot be placed during the first scan: the full rescan it asks for runs once the loop starts', async () => {
    let placed = 0;
    const fake = fakeWatch(() => (++placed === 3 ? Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' }) : undefined));
    const rec = recordingHooks();
    source = await openDirPackSource({ ...optionsOf({ scanIntervalMs: 3_600_000, watchScanIntervalMs: 3_600_000 }), dataDir: dir }, rec.hooks, fake.watch);
    expect(source.watch?.healthy).toBe(false);
    expect(log).toEqual([expect.stringMatching(/stopped: cannot watch .*: the inotify watch limit is reached/)]);
    await until(() => rec.scans.length === 2, 1000);
    expect(rec.scans).toEqual(['full changed', 'full']);
  });

  it('a rescan that fails is logged and the next one runs', async () => {
    let failing = false;
    const rec = recordingHooks(() => (failing ? new Error('disk on fire') : undefined));
    const fake = fakeWatch();
    source = await openDirPackSource({ ...optionsOf(), dataDir: dir }, rec.hooks, fake.watch);
    failing = true;
    fake.fire(join(dir, 'account'), 'x.md');
    await until(() => log.length === 1);
    expect(log).toEqual(['rescan failed: disk on fire']);
    failing = false;
    await writeDataFile(dir, 'account/x.md', 'x\n');
    fake.fire(join(dir, 'account'), 'x.md');
    await until(() => rec.changes() === 1);
  });

  it('close stops the watch and the loop', async () => {
    const fake = fakeWatch();
    const rec = recordingHooks();
    const opened = await openDirPackSource({ ...optionsOf({ watchScanIntervalMs: 50 }), dataDir: dir }, rec.hooks, fake.watch);
    await opened.close();
    expect(fake.open()).toEqual([]);
    const scans = rec.scans.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(rec.scans.length).toBe(scans);
  });
});

describe('openBucketPackSource', () => {
  const publishTo = (bucket: MemoryBucket) => publish({ dataDir: dir, store: bucket, maxFileSize: 1 << 20, log: () => undefined });

  it('needs a publication to start: the store is named, nothing is served', async () => {
    const bucket = new MemoryBucket({ description: 's3://bkt/empty' });
    const rec = recordingHooks();
    await expect(openBucketPackSource(optionsOf({ }), rec.hooks, bucket)).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('serves the current publication, says what and how, and follows a new one by polling', async () => {
    const bucket = new MemoryBucket({ description: 's3://bkt/pfx' });
    await publishTo(bucket);
    const rec = recordingHooks();
    const opened = await openBucketPackSource(optionsOf({ publicationPollMs: 50, blobCacheBytes: 1 << 20 }), rec.hooks, bucket);
    source = opened;
    expect(rec.scans).toEqual(['full changed']);
    expect(opened.watch).toBeNull();
    expect(opened.directory).toBe(opened.store);
    expect(opened.describe()).toEqual({
      what: `s3://bkt/pfx (published ${opened.store.pointer?.publishedAt})`,
      upkeep: 'new publications looked for every 50ms; blob cache 1.0 MiB in memory',
    });
    await writeDataFile(dir, 'teams/payments/DUTY.md', '# Payments, again\n');
    await publishTo(bucket);
    await until(() => rec.changes() === 1);
    expect((await opened.store.read('team_payments', 'DUTY.md'))?.bytes.toString()).toBe('# Payments, again\n');
    expect(log).toEqual([]);
  });

  it('names the disk cache when there is one', async () => {
    const bucket = new MemoryBucket();
    await publishTo(bucket);
    const cacheDir = await mkdtemp(join(tmpdir(), 'kfs-blobs-'));
    try {
      const opened = await openBucketPackSource(optionsOf({ blobCacheBytes: 2 << 20, blobCacheDir: cacheDir, blobCacheDiskBytes: 3 * 2 ** 30 }), recordingHooks().hooks, bucket);
      source = opened;
      expect(opened.describe().upkeep).toBe(`new publications looked for every 500ms; blob cache 2.0 MiB in memory + 3.0 GiB in ${cacheDir}`);
    } finally {
      await source?.close();
      source = undefined;
      await rm(cacheDir, { recursive: true, force: true });
    }
  });

  it('refresh() looks now and tells the control plane only of a new publication', async () => {
    const bucket = new MemoryBucket();
    await publishTo(bucket);
    const rec = recordingHooks();
    source = await openBucketPackSource(optionsOf({ publicationPollMs: 3_600_000 }), rec.hooks, bucket);
    await source.refresh();
    expect(rec.changes()).toBe(0);
    await writeDataFile(dir, 'account/new.md', 'n\n');
    await publishTo(bucket);
    await source.refresh();
    expect(rec.changes()).toBe(1);
    expect(rec.scans).toEqual(['full changed', 'full', 'full changed']);
  });

  it('a store outage while serving is said once, its end once; the last publication stays served', async () => {
    const bucket = new MemoryBucket({ description: 's3://bkt/pfx' });
    await publishTo(bucket);
    let down = false;
    const get = bucket.get.bind(bucket);
    bucket.get = async (key, options) => {
      if (down) throw new ObjectStoreError('unreachable', `s3://bkt/pfx/${key}: connection refused`);
      return get(key, options);
    };
    const rec = recordingHooks();
    source = await openBucketPackSource(optionsOf({ publicationPollMs: 20 }), rec.hooks, bucket);
    const polls = () => rec.scans.length;
    down = true;
    const before = polls();
    await new Promise((r) => setTimeout(r, 200));
    expect(log).toEqual([`cannot follow new publications: s3://bkt/pfx/${POINTER_KEY}: connection refused (serving the last one; retrying every 20ms)`]);
    expect(polls()).toBe(before); // a failed look records no scan
    expect(source.store.scopes().map((s) => s.scope)).toEqual(['account', 'team_payments']);
    down = false;
    await until(() => log.length === 2);
    expect(log[1]).toBe('s3://bkt/pfx: reachable again');
    await new Promise((r) => setTimeout(r, 100));
    expect(log.length).toBe(2);
  });

  it('close waits for a running poll, stops polling and closes the store', async () => {
    const bucket = new MemoryBucket();
    await publishTo(bucket);
    let closed = 0;
    bucket.close = async () => void closed++;
    const rec = recordingHooks();
    const opened = await openBucketPackSource(optionsOf({ publicationPollMs: 10 }), rec.hooks, bucket);
    await new Promise((r) => setTimeout(r, 50));
    await opened.close();
    expect(closed).toBe(1);
    const polls = rec.scans.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(rec.scans.length).toBe(polls);
  });
});
