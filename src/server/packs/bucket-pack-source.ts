// The scale-out pack source: a publication in object storage, followed by
// polling its pointer every `publicationPollMs` (a conditional GET: an
// unchanged pointer is one 304). A new publication is loaded and checked
// whole while the old one keeps being served, then switched to at once, so
// replicas see it within about one poll interval plus its load time, without
// rescanning anything.
//
// At start the store must answer and hold a valid publication: otherwise
// the replica does not start (`unavailable`, exit 4, naming the store and
// why). While serving, a store outage is logged once (and once more when it
// ends); plans are served from the last good publication, file reads that
// need the store answer 503.

import { formatBytes, formatDurationFlag } from '../../core/text/units.js';
import type { ObjectStore } from '../../store/objects/object-store.js';
import { BucketPackStore } from '../../store/publication/bucket-pack-store.js';
import type { ResolvedOptions } from '../options.js';
import type { PackSource, SourceHooks } from './pack-source.js';

export async function openBucketPackSource(
  options: ResolvedOptions,
  hooks: SourceHooks,
  objectStore: ObjectStore,
): Promise<PackSource & { readonly store: BucketPackStore }> {
  const store = new BucketPackStore({
    store: objectStore,
    maxFileSize: options.maxFileSize,
    cacheBytes: options.blobCacheBytes,
    cacheDir: options.blobCacheDir,
    cacheDiskBytes: options.blobCacheDiskBytes,
    log: options.log,
    metrics: hooks.metrics,
  });
  // Each look for a publication (one conditional GET, plus the load of a new one) is measured like a scan.
  const refresh = (): Promise<boolean> => hooks.timedScan('full', async () => (await store.refresh()) === 'switched');
  await refresh();

  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let outage: string | null = null;
  const poll = async (): Promise<void> => {
    try {
      if (await refresh()) hooks.changed();
      if (outage !== null) options.log(`${objectStore.description}: reachable again`);
      outage = null;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (outage === null) options.log(`cannot follow new publications: ${message} (serving the last one; retrying every ${formatDurationFlag(options.publicationPollMs)})`);
      outage = message;
    }
  };
  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      timer = null;
      running = poll().finally(() => {
        running = null;
        schedule();
      });
    }, options.publicationPollMs);
  };
  schedule();

  return {
    store,
    directory: store,
    watch: null,
    describe() {
      const cache = `blob cache ${formatBytes(options.blobCacheBytes)} in memory${options.blobCacheDir !== undefined ? ` + ${formatBytes(options.blobCacheDiskBytes)} in ${options.blobCacheDir}` : ''}`;
      return {
        what: `${objectStore.description} (published ${store.pointer?.publishedAt ?? '?'})`,
        upkeep: `new publications looked for every ${formatDurationFlag(options.publicationPollMs)}; ${cache}`,
      };
    },
    async refresh() {
      if (await refresh()) hooks.changed();
    },
    async close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      await running;
      await objectStore.close();
    },
  };
}
