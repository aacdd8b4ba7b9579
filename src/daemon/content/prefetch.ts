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
//
// Files go in batches (POST /v1/batch: one request per scope and up to
// BATCH_FILES files / BATCH_BYTES, `batchConcurrency` batches in flight),
// since one request per file caps a cold prefetch at a few hundred files a
// second. Whatever a batch does not deliver (the batch failed or was cut
// short, or the client has no batch call) is then fetched file by file with
// `concurrency` workers, as before; a batch the control plane refused
// (denied, not found, unauthorized) is not retried file by file: an open
// asks again anyway.
//
// Prefetch yields to agents. Every request it makes is marked prefetch
// (`x-kfs-priority`), and a control plane serving its share of those already
// sheds the rest (503, Retry-After): the batch then waits that long, with
// jitter so a fleet does not come back in step, and is asked again, instead of
// falling back to per-file requests (which would add load exactly when there
// is too much). And no prefetch request starts while an open is waiting on
// bytes, or within FOREGROUND_QUIET_MS of one (ContentFetcher.foregroundQuiet).

import { isKnowledgeError } from '../../core/errors.js';
import { formatBytes } from '../../core/text/units.js';
import type { PlannedFile, Tree } from '../../core/tree/tree.js';
import { abortableSleep } from '../abortable-sleep.js';
import { isShed } from '../control-plane/reply-error.js';
import type { BatchOutcome, ContentFetcher, FileRef } from './fetcher.js';

/** Prefetch starts no request until no open has waited on bytes for this long. */
export const FOREGROUND_QUIET_MS = 100;

/** Most files per batch (the server takes up to BATCH_MAX_PATHS). */
export const BATCH_FILES = 400;
/** Batches close at about this many bytes of content. */
export const BATCH_BYTES = 4 * 1024 * 1024;
/** Request bodies stay under the control plane's default 64 KiB limit. */
const BATCH_BODY_BYTES = 56 * 1024;

export interface PrefetchOptions {
  readonly fetcher: ContentFetcher;
  readonly concurrency?: number;
  /** Batches in flight (default 3); 0 = file by file only. */
  readonly batchConcurrency?: number;
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
  /** Aborts the batches in flight on cancel (stop), so closing the client does not wait for them. */
  private abort = new AbortController();
  readonly progress: PrefetchProgress = { done: 0, total: 0 };
  /** Batches the control plane shed (asked again after its Retry-After). */
  shed = 0;

  constructor(private readonly opts: PrefetchOptions) {}

  /** Starts (or restarts) prefetching `tree`; returns the run's promise (never rejects). */
  schedule(tree: Tree): Promise<void> {
    const generation = ++this.generation;
    this.current = this.run(tree, generation);
    return this.current;
  }

  cancel(): void {
    this.generation++;
    this.abort.abort();
    this.abort = new AbortController();
  }

  /** Resolves when the latest run has finished or been cancelled. */
  idle(): Promise<void> {
    return this.current;
  }

  /**
   * One prefetch batch, started only when no open is waiting, and asked again
   * after the control plane's Retry-After (with jitter, so a fleet does not
   * come back in step) for as long as it sheds it and this run is current.
   * Files delivered before a shed stay delivered; the outcome covers them all.
   */
  private async fetchBatchPolitely(files: readonly PlannedFile[], signal: AbortSignal, generation: number): Promise<BatchOutcome> {
    const { fetcher } = this.opts;
    const fetched: FileRef[] = [];
    const failed: FileRef[] = [];
    const skipped: FileRef[] = [];
    let ask: readonly FileRef[] = files;
    for (;;) {
      await fetcher.foregroundQuiet(FOREGROUND_QUIET_MS, signal);
      const outcome = await fetcher.fetchBatch(files[0]!.scope, ask, signal, true);
      fetched.push(...outcome.fetched);
      failed.push(...outcome.failed);
      skipped.push(...outcome.skipped);
      if (!isShed(outcome.error) || generation !== this.generation || signal.aborted) {
        return { fetched, failed, skipped, unanswered: outcome.unanswered, ...(outcome.error !== undefined ? { error: outcome.error } : {}) };
      }
      this.shed++;
      ask = outcome.unanswered;
      if (ask.length === 0) return { fetched, failed, skipped, unanswered: [] };
      await abortableSleep(outcome.error.retryAfterMs * (0.5 + Math.random()), signal);
    }
  }

  private async run(tree: Tree, generation: number): Promise<void> {
    const { fetcher, log } = this.opts;
    const seen = new Set<string>();
    const todo: PlannedFile[] = [];
    for (const file of tree.plannedFiles()) {
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
    const line = () => `prefetch: ${done}/${todo.length} files (${formatBytes(doneBytes)})`;
    const advance = (files: number, bytes: number, failures: number) => {
      done += files;
      doneBytes += bytes;
      failed += failures;
      if (generation === this.generation) this.progress.done = done;
      const now = Date.now();
      if (now - lastReport >= every && done < todo.length) {
        lastReport = now;
        log(line());
      }
    };

    // 1. Batches, one scope each.
    const perFile: PlannedFile[] = [];
    const batches = (this.opts.batchConcurrency ?? 3) > 0 ? splitBatches(todo) : [];
    if (batches.length === 0) perFile.push(...todo);
    let nextBatch = 0;
    let batchProblem = false;
    const signal = this.abort.signal;
    const batchWorker = async () => {
      while (nextBatch < batches.length && generation === this.generation) {
        const files = batches[nextBatch++]!;
        const outcome = await this.fetchBatchPolitely(files, signal, generation);
        const refused = isKnowledgeError(outcome.error) && ['denied', 'not_found', 'unauthorized', 'forbidden'].includes(outcome.error.code);
        if (outcome.error !== undefined && !refused && !batchProblem && generation === this.generation) {
          batchProblem = true; // once per run
          const why = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
          log(`prefetch: a batch failed (${why}); fetching its remaining files one by one`);
        }
        perFile.push(...(outcome.skipped as PlannedFile[]));
        if (!refused) perFile.push(...(outcome.unanswered as PlannedFile[]));
        const failures = outcome.failed.length + (refused ? outcome.unanswered.length : 0);
        advance(outcome.fetched.length + failures, outcome.fetched.reduce((n, f) => n + f.size, 0), failures);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.batchConcurrency ?? 3, batches.length) }, batchWorker));

    // 2. File by file: what the batches left.
    let next = 0;
    const worker = async () => {
      while (next < perFile.length && generation === this.generation) {
        const file = perFile[next++]!;
        try {
          await fetcher.foregroundQuiet(FOREGROUND_QUIET_MS, signal);
          await fetcher.get(file, { prefetch: true });
          advance(1, file.size, 0);
        } catch {
          advance(1, 0, 1);
        }
      }
    };
    const workers = Array.from({ length: Math.min(this.opts.concurrency ?? 8, perFile.length) }, worker);
    await Promise.all(workers);
    if (generation !== this.generation) return;
    log(`${line()}: done${failed > 0 ? `, ${failed} failed (fetched on open instead)` : ''}`);
  }
}

/** Groups files by scope into batches of at most BATCH_FILES files, ~BATCH_BYTES and a request body under the limit. */
export function splitBatches(files: readonly PlannedFile[]): PlannedFile[][] {
  const byScope = new Map<string, PlannedFile[]>();
  for (const f of files) {
    const list = byScope.get(f.scope);
    if (list === undefined) byScope.set(f.scope, [f]);
    else list.push(f);
  }
  const batches: PlannedFile[][] = [];
  for (const list of byScope.values()) {
    let current: PlannedFile[] = [];
    let bytes = 0;
    let body = 64;
    for (const f of list) {
      const entry = Buffer.byteLength(JSON.stringify(f.scopePath)) + 1;
      if (current.length > 0 && (current.length >= BATCH_FILES || bytes + f.size > BATCH_BYTES || body + entry > BATCH_BODY_BYTES)) {
        batches.push(current);
        current = [];
        bytes = 0;
        body = 64;
      }
      current.push(f);
      bytes += f.size;
      body += entry;
    }
    if (current.length > 0) batches.push(current);
  }
  return batches;
}
