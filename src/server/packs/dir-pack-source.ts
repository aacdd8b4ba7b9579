// The embedded pack source: DATA/directory.json and DATA/account/,
// DATA/teams/<id>/ on local disk.
//
// Start-up order: directory.json must be valid (else KnowledgeError('config'))
// and the first scan must finish before the first request, so a plan never
// shows a half-scanned tree. The first scan also places the watches
// (data-watch.ts). Afterwards a watched change is rescanned (only its
// directory and what is below it, or directory.json) about 50 ms later, and
// everything is rescanned every watchScanIntervalMs as a safety net; without
// a working watch, every scanIntervalMs. Scans never overlap (rescan-loop.ts).

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { formatDurationFlag } from '../../core/text/units.js';
import { DataWatch, emptyWork, fullWork, mergeWork, type ScanWork, type WatchFunction } from './data-watch.js';
import { DirectorySource } from './directory-source.js';
import { DirPackStore } from '../../store/data-dir/dir-pack-store.js';
import type { ResolvedOptions } from '../options.js';
import type { PackSource, SourceHooks } from './pack-source.js';
import { RescanLoop } from './rescan-loop.js';

export async function openDirPackSource(options: ResolvedOptions & { dataDir: string }, hooks: SourceHooks, watchFunction?: WatchFunction): Promise<PackSource> {
  const { timedScan } = hooks;
  const dataStat = await stat(options.dataDir).catch(() => null);
  if (!dataStat?.isDirectory()) throw new KnowledgeError('config', `--data ${options.dataDir}: not a directory`);
  const directory = await DirectorySource.open(join(options.dataDir, 'directory.json'), options.log);
  // Changes noticed before the rescan loop exists (start-up) wait here for it.
  let loop: RescanLoop | null = null;
  const early = emptyWork();
  const watch = options.watch
    ? new DataWatch({
        root: options.dataDir,
        changed: (work) => (loop ? loop.notice(work) : mergeWork(early, work)),
        failed: (reason) => {
          options.log(`watching ${options.dataDir} stopped: ${reason}; rescanning everything every ${formatDurationFlag(options.scanIntervalMs)} (--scan-interval) instead`);
          // Events may have been lost: rescan everything now, then at the short interval.
          if (loop === null) mergeWork(early, fullWork());
          loop?.retime();
          loop?.notice(fullWork());
        },
        ...(watchFunction ? { watch: watchFunction } : {}),
      })
    : null;
  const store = new DirPackStore(options.dataDir, { maxFileSize: options.maxFileSize, log: options.log, ...(watch ? { observer: watch } : {}) });
  await timedScan('full', () => store.scan());
  // directory.json was read before its directory was watched.
  await directory.refresh();

  const scan = async (work: ScanWork): Promise<void> => {
    try {
      let changed = false;
      if (work.full || work.directory) changed = await directory.refresh();
      if (work.full) {
        watch?.renew();
        changed = (await timedScan('full', () => store.scan())) || changed;
      } else if (work.layout || work.packs.size > 0) {
        changed = (await timedScan('partial', () => store.scan(work.packs))) || changed;
      }
      if (changed) hooks.changed();
    } catch (err) {
      options.log(`rescan failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  loop = new RescanLoop({
    scan,
    fullIntervalMs: () => (watch?.healthy ? options.watchScanIntervalMs : options.scanIntervalMs),
  });
  const rescanLoop = loop;
  if (early.full || early.directory || early.layout || early.packs.size > 0) loop.notice(early);

  return {
    store,
    directory,
    watch,
    describe() {
      const upkeep = watch?.healthy
        ? `watching ${watch.size} directories, full rescan every ${formatDurationFlag(options.watchScanIntervalMs)}`
        : `full rescan every ${formatDurationFlag(options.scanIntervalMs)}`;
      return { what: options.dataDir, upkeep };
    },
    refresh: () => rescanLoop.now(),
    async close() {
      watch?.close();
      await rescanLoop.close();
    },
  };
}
