// Directory read-ahead for opens that miss the content cache.
//
// Without it, a `grep -r` over content that is not cached yet (prefetch off,
// a tree larger than the cache, or a search that overtakes the prefetch)
// costs one control-plane round trip per file, in a row: ~4 ms each on
// loopback, 25 s for 6 000 files. Shell tools walk a directory's files one
// after another, so the second miss in a row in one directory takes the
// rest of that directory (from the file being opened on, in listing order,
// files of the same scope not cached yet) in one batch request. The open
// that triggered it waits for its own frame, the first of the batch; the
// next opens find theirs in flight or cached. A lone `cat` fetches one file:
// a single miss in a directory reads nothing ahead.
//
// Every file still arrives verified against its sha256 (ContentFetcher), and
// the batch is authorised by the control plane like any other. A batch that
// fails (cut short, corrupted, refused) pauses read-ahead for a while, so a
// path that keeps breaking batches costs at most one per pause, not one per
// open.

import { parentPath, type FileNode, type Tree } from '../../core/tree/tree.js';
import type { ContentFetcher } from './fetcher.js';

export interface ReadAheadOptions {
  readonly fetcher: Pick<ContentFetcher, 'fetchBatch' | 'isCached'>;
  readonly tree: () => Tree;
  /** How long a failed batch pauses read-ahead (ms). */
  readonly pauseMs?: number;
  readonly clock?: () => number;
  /** Most files one read-ahead asks for. */
  readonly maxFiles: number;
  /** A read-ahead stops adding files at about this many bytes; 0 = off (see readAheadBytes). */
  readonly maxBytes: number;
}

const DEFAULT_PAUSE_MS = 30_000;
/** Below this much room a read-ahead would evict what it just fetched. */
const MIN_READ_AHEAD_BYTES = 64 * 1024;

/**
 * How many bytes one read-ahead may bring, given where they can stay: a
 * quarter of the memory cache, or `batchBytes` when --cache-dir keeps them
 * too. 0 = no read-ahead (no room to keep what it fetches).
 */
export function readAheadBytes(batchBytes: number, cacheBytes: number, hasDiskCache: boolean): number {
  const room = hasDiskCache ? batchBytes : Math.min(batchBytes, Math.floor(cacheBytes / 4));
  return room >= MIN_READ_AHEAD_BYTES ? room : 0;
}

export class DirectoryReadAhead {
  /** Directory of the last miss: a second miss there starts a read-ahead. */
  private lastMissDir: string | undefined;
  /** Directories with a read-ahead in flight: one at a time each. */
  private readonly running = new Set<string>();
  private pausedUntil = 0;
  started = 0;

  constructor(private readonly opts: ReadAheadOptions) {}

  /** Call on an open whose bytes are not in memory, before fetching them. */
  onMiss(node: FileNode): void {
    const dir = parentPath(node.path);
    const again = dir === this.lastMissDir;
    this.lastMissDir = dir;
    const now = (this.opts.clock ?? Date.now)();
    if (this.opts.maxBytes <= 0 || !again || this.running.has(dir) || now < this.pausedUntil) return;
    const refs = this.filesFrom(node, dir);
    if (refs.length < 2) return;
    this.started++;
    this.running.add(dir);
    // Never rejects; files it does not deliver are fetched one by one when opened.
    void this.opts.fetcher.fetchBatch(node.scope, refs).then((outcome) => {
      this.running.delete(dir);
      if (outcome.error !== undefined) this.pausedUntil = (this.opts.clock ?? Date.now)() + (this.opts.pauseMs ?? DEFAULT_PAUSE_MS);
    });
  }

  /** `node`, then the uncached files listed after it in its directory, within the bounds. */
  private filesFrom(node: FileNode, dir: string): FileNode[] {
    const tree = this.opts.tree();
    const listing = tree.get(dir);
    if (listing?.kind !== 'dir') return [];
    const prefix = dir === '/' ? '/' : `${dir}/`;
    const refs: FileNode[] = [node];
    let bytes = node.size;
    const names = listing.names;
    const self = names.indexOf(node.path.slice(prefix.length));
    for (let i = self + 1; i < names.length && refs.length < this.opts.maxFiles && bytes < this.opts.maxBytes; i++) {
      const sibling = tree.get(prefix + (names[i] as string));
      if (sibling?.kind !== 'file' || sibling.scope !== node.scope || this.opts.fetcher.isCached(sibling.sha256)) continue;
      if (bytes + sibling.size > this.opts.maxBytes) continue; // a large file is left to its own open
      refs.push(sibling);
      bytes += sibling.size;
    }
    return refs;
  }
}
