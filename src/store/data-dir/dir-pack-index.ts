// The index a data-directory scan builds (dir-pack-store.ts): each pack's
// snapshot with the stat every file was hashed at, the options and the
// observer a scan reports to, and where a scope's pack lives.

import { join } from 'node:path';
import { snapshotScope, type PlanFile, type ScopeSnapshot } from '../../core/session/plan.js';
import { parseScope, type ScopeName } from '../../core/scope.js';
import type { Stats } from 'node:fs';
import type { Fingerprint } from './scan-slices.js';

export interface DirPackStoreOptions {
  readonly maxFileSize: number;
  readonly log: (line: string) => void;
  readonly observer?: ScanObserver;
}

/** Follows which directories the scans walk (to watch them). */
export interface ScanObserver {
  /** `dir` is about to be listed; `scope` null for DATA/ and DATA/teams/ (the layout of packs). */
  listing(dir: string, scope: ScopeName | null): void;
  /** A scan of the directories `within` of `scope` (and below) listed exactly `dirs`. */
  packScanned(scope: ScopeName, dirs: ReadonlySet<string>, within: readonly string[]): void;
  /** The packs that exist after a scan. */
  packsPresent(scopes: ReadonlySet<ScopeName>): void;
}

/** A file of the current snapshot with the stat it was hashed at (null: unknown, re-hash next scan). */
export interface IndexEntry {
  readonly file: PlanFile;
  readonly fp: Fingerprint | null;
}

export interface ScopeIndex {
  readonly snapshot: ScopeSnapshot;
  readonly byPath: ReadonlyMap<string, IndexEntry>;
}

/** A listed entry: a directory to walk, a servable file's stat, or skipped. */
export type SeenEntry = 'dir' | 'skip' | Stats;

/** Files up to this size are hashed synchronously inside a slice. */
export const SYNC_HASH_BYTES = 256 * 1024;
export const MAX_LOGGED = 100_000;
export const utf8 = new TextDecoder('utf-8', { fatal: true });

export function indexOf(scope: ScopeName, entries: IndexEntry[]): ScopeIndex {
  const snapshot = snapshotScope(scope, entries.map((e) => e.file));
  return { snapshot, byPath: new Map(entries.map((e) => [e.file.path, e])) };
}

/** The given directories without those inside another of them ('' = the pack, contains all). */
export function outermost(rels: readonly string[]): string[] {
  const sorted = [...new Set(rels)].sort();
  const out: string[] = [];
  for (const r of sorted) {
    if (!out.some((o) => o === '' || r.startsWith(`${o}/`))) out.push(r);
  }
  return out;
}

export function scopeDir(root: string, scope: ScopeName): string | null {
  const parsed = parseScope(scope);
  if (parsed === null) return null;
  return parsed.kind === 'account' ? join(root, 'account') : join(root, 'teams', parsed.teamId);
}
