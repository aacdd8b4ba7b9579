// Where a control plane's packs and directory.json come from, and what keeps
// them current: a data directory (dir-pack-source.ts: scans, a watch, a
// rescan loop) or a publication in object storage (bucket-pack-source.ts: a
// pointer poller). Routes see only `store` and `directory`; nothing above
// this seam asks which one it is.

import type { MetricsRecorder } from '../../core/metrics.js';
import type { DataWatch } from './data-watch.js';
import type { Directory } from '../../store/data-dir/directory.js';
import type { PackStore } from '../../store/pack-store.js';

/** The current directory.json (people and teams). */
export interface DirectoryView {
  readonly directory: Directory;
}

/** What a pack source tells the control plane. */
export interface SourceHooks {
  /** Runs one scan of the packs, measured (metrics); answers whether anything changed. */
  timedScan(kind: 'full' | 'partial', run: () => Promise<boolean>): Promise<boolean>;
  /** Packs or directory.json changed: waiting plan long-polls recompute. */
  changed(): void;
  /** Where sources record what they do (object-store requests, blob cache, publications). */
  readonly metrics: MetricsRecorder;
}

export interface PackSource {
  readonly store: PackStore;
  readonly directory: DirectoryView;
  /** The data-directory watch; null when there is none (watch off, or object storage). */
  readonly watch: DataWatch | null;
  /** For the start-up log line: what is served, and how it is kept current. */
  describe(): { readonly what: string; readonly upkeep: string };
  /** Brings packs and directory.json up to date now (tests use it instead of waiting). */
  refresh(): Promise<void>;
  /** Stops watching and polling; resolves when no refresh is running. */
  close(): Promise<void>;
}
