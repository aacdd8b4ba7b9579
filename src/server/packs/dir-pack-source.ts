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
import { gitPlace } from '../../store/data-dir/git-history.js';
import { ProvenancedPackStore } from '../../store/data-dir/provenanced-store.js';
import { ProvenanceRecorder } from '../../store/data-dir/provenance-recorder.js';
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
  const recorder = new ProvenanceRecorder({ dataDir: options.dataDir, release: options.release, sourceUrl: options.sourceUrl, log: options.log, now: options.now });
  await recorder.look(store.scopes());

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
      // After every scan that changed files (their commits may have too), and on the HEAD poll below.
      if (changed || work.full) changed = (await recorder.look(store.scopes())) || changed;
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
  // A commit of bytes already served changes no file, so no scan notices it: HEAD is asked every
  // --scan-interval (one short `git rev-parse`), and a new HEAD is looked at at once.
  const headPoll =
    recorder.head === null
      ? null
      : setInterval(() => {
          void gitPlace(options.dataDir).then(async (place) => {
            if (typeof place !== 'string' && place.head !== recorder.head && (await recorder.look(store.scopes()))) hooks.changed();
          });
        }, Math.max(options.scanIntervalMs, 1000));
  headPoll?.unref();
  if (early.full || early.directory || early.layout || early.packs.size > 0) loop.notice(early);

  return {
    store: new ProvenancedPackStore(store, recorder),
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
      if (headPoll !== null) clearInterval(headPoll);
      watch?.close();
      await rescanLoop.close();
    },
  };
}
