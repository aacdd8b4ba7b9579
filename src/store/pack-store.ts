// The pack store: where scope contents come from. The embedded default reads
// plain directories (dir-pack-store.ts); scale-out replicas read a publication
// in object storage (bucket-pack-store.ts). Route handlers see only this
// interface, so tests wrap a real store to count calls or inject faults.
//
// Contract: `read` returns bytes together with the sha256 of exactly those
// bytes; it never answers with a hash taken from an older version of a file.

import type { ScopeName } from '../core/scope.js';
import type { ScopeSnapshot } from '../core/session/plan.js';

export interface PackFile {
  readonly bytes: Buffer;
  readonly sha256: string;
  readonly size: number;
  readonly mtimeMs: number;
}

export interface PackStore {
  /** Every scope that has a pack now, account first, then teams by id. */
  scopes(): readonly ScopeSnapshot[];
  /** The scope's current snapshot, or undefined if it has no pack. */
  snapshot(scope: ScopeName): ScopeSnapshot | undefined;
  /**
   * The file's bytes and their hash, or null if the scope or file does not
   * exist. `version` is the sha256 the caller's plan names: a store that
   * still holds that earlier version of this path (a publication store keeps
   * the previous publication) may answer it instead of the current one, so
   * an open racing a new publication gets the version it expects; the
   * answer's sha256 says which version it is. Other stores ignore it.
   */
  read(scope: ScopeName, path: string, version?: string): Promise<PackFile | null>;
  /**
   * Optional fast path for batches: the same checks and the same answer as
   * `read`, done synchronously (one async fs call costs more than reading a
   * small file). Returns undefined when the file is too large for it: use `read`.
   * `parents` memoises resolved directories across the calls of one batch (a
   * batch is mostly siblings; a directory swapped for a symlink meanwhile is
   * caught by the next batch, and O_NOFOLLOW still guards the file itself).
   */
  readSmallSync?(scope: ScopeName, path: string, parents?: Map<string, string | null>): PackFile | null | undefined;
  /** Increases whenever any snapshot changes: lets pollers skip work cheaply. */
  readonly generation: number;
  /** A store with a blob cache: its memory lookups so far (exported as metrics). */
  cacheCounts?(): { readonly hits: number; readonly misses: number };
}
