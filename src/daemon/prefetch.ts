// Background content prefetch (--prefetch-content on): after the mount is
// ready, and again whenever a plan brings files the cache lacks, fetch them
// with bounded concurrency so the first `grep -r` reads from memory.
//
// Each run works on one tree; a newer tree cancels the run in progress
// (generation counter) and starts from what is still missing. Progress goes
// to stderr at most once a second, plus a final line. Failures are counted,
// not fatal: an open fetches on demand anyway. When the materialised content
// exceeds the memory cache and there is no --cache-dir, prefetching would
// only evict itself, so it is skipped with a message.

import { formatBytes } from '../core/units.js';
import type { FileNode, Tree } from '../core/tree.js';
import type { ContentFetcher } from './fetcher.js';

export interface PrefetchOptions {
  readonly fetcher: ContentFetcher;
  readonly concurrency?: number;
  /** Memory cache bound; with no disk cache, content above it is not prefetched. */
  readonly cacheBytes: number;
  readonly hasDiskCache: boolean;
  readonly log: (line: string) => void;
  readonly progressEveryMs?: number;
}

export interface PrefetchProgress {
  done: number;
  total: number;
}

export class Prefetcher {
  private generation = 0;
  private lastSkip = '';
  private current: Promise<void> = Promise.resolve();
  readonly progress: PrefetchProgress = { done: 0, total: 0 };

  constructor(private readonly opts: PrefetchOptions) {}

  /** Starts (or restarts) prefetching `tree`; returns the run's promise (never rejects). */
  schedule(tree: Tree): Promise<void> {
    const generation = ++this.generation;
    this.current = this.run(tree, generation);
    return this.current;
  }

  cancel(): void {
    this.generation++;
  }

  /** Resolves when the latest run has finished or been cancelled. */
  idle(): Promise<void> {
    return this.current;
  }

  private async run(tree: Tree, generation: number): Promise<void> {
    const { fetcher, log } = this.opts;
    const seen = new Set<string>();
    const todo: FileNode[] = [];
    for (const file of tree.files()) {
      if (seen.has(file.sha256) || fetcher.isCached(file.sha256)) continue;
      seen.add(file.sha256);
      todo.push(file);
    }
    if (todo.length === 0) return;
    if (!this.opts.hasDiskCache && tree.totalBytes > this.opts.cacheBytes) {
      const skip = `prefetch: skipped (${formatBytes(tree.totalBytes)} materialised > --cache-size ${formatBytes(this.opts.cacheBytes)}; set --cache-dir or a larger --cache-size)`;
      if (skip !== this.lastSkip) log(skip); // once, not at every plan
      this.lastSkip = skip;
      return;
    }
    this.progress.done = 0;
    this.progress.total = todo.length;
    const every = this.opts.progressEveryMs ?? 1000;
    let done = 0;
    let doneBytes = 0;
    let failed = 0;
    let lastReport = Date.now();
    let next = 0;
    const line = () => `prefetch: ${done}/${todo.length} files (${formatBytes(doneBytes)})`;
    const worker = async () => {
      while (next < todo.length && generation === this.generation) {
        const file = todo[next++]!;
        try {
          await fetcher.get(file);
          doneBytes += file.size;
        } catch {
          failed++;
        }
        done++;
        if (generation === this.generation) this.progress.done = done;
        const now = Date.now();
        if (now - lastReport >= every && next < todo.length) {
          lastReport = now;
          log(line());
        }
      }
    };
    const workers = Array.from({ length: Math.min(this.opts.concurrency ?? 8, todo.length) }, worker);
    await Promise.all(workers);
    if (generation !== this.generation) return;
    log(`${line()}: done${failed > 0 ? `, ${failed} failed (fetched on open instead)` : ''}`);
  }
}
