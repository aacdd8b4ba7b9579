// Verified file bytes for the filesystem and the prefetcher.
//
// Order: memory cache → disk cache (verified) → the control plane. Every
// body from the network is checked against the plan's size and sha256
// before it is cached or returned, so no reader ever sees a byte that does
// not belong to the version the tree shows. Concurrent requests for one
// sha256 share one fetch (coalescing); the in-flight map is bounded by the
// number of distinct files being opened at once.
//
// A body that hashes to the server's own x-kfs-sha256 but not to the plan's
// means the file changed after the plan was fetched: the new bytes are
// cached under their own hash (they are valid content, just not this
// version), the sync loop is asked to refresh, and this open fails with EIO
// rather than serving bytes whose size the kernel does not know yet. Any
// other mismatch is an `integrity` error (EIO, logged); a sync is asked for
// then too, since a file that grew past the plan's size looks the same.
//
// `fetchBatch` (prefetch) brings many files of one scope in one request. Each
// file it takes is registered as awaited-from-the-batch, so an open of it
// while the batch is in flight waits for the batch instead of fetching it
// again; files the batch does not deliver (the batch failed, was cut short,
// or answered something not matching the plan) release their waiters to the
// per-file path, so an open always gets the same answer it would without
// batches. Verification is the same: plan size and sha256 before caching.
//
// Foreground first: an open (an agent waiting) of a file a *prefetch* batch
// holds waits for that batch only while the batch is close to it (at most
// NEAR_FRAMES frames ahead) and flowing (a frame at least every
// BATCH_PATIENCE_MS); otherwise it asks for the file by itself as well and
// takes whichever answer comes first. Behind a busy control plane a prefetch
// batch may have megabytes to send before that file, or wait to be served at
// all; a `grep -r` right behind a flowing batch still takes its files from it.
// For the same reason a read-ahead (an agent reading a directory) takes over
// the files a prefetch batch holds but is not close to. Opens waiting on bytes are counted (`foregroundQuiet`), and the
// prefetcher starts no new request until none has waited for a while.

import { KnowledgeError, isKnowledgeError } from '../../core/errors.js';
import type { ContentCache } from './content-cache.js';
import type { PlannedFile } from '../../core/tree/tree.js';
import { sha256Hex } from '../../core/sha256.js';
import type { ControlClient } from '../control-plane/control-client.js';
import { abortableSleep } from '../abortable-sleep.js';

/** What one `fetchBatch` did with its files. */
export interface BatchOutcome {
  /** Verified and cached from the batch. */
  readonly fetched: readonly FileRef[];
  /** Answered, but not usable: missing now, or changed since the plan (a sync is requested). */
  readonly failed: readonly FileRef[];
  /** Not asked for (already cached, on disk, or being fetched): use `get`. */
  readonly skipped: readonly FileRef[];
  /** Asked for but not answered because the batch failed: use `get` (or give up when `error` is a refusal). */
  readonly unanswered: readonly FileRef[];
  readonly error?: unknown;
}

interface BatchWaiter {
  readonly ref: FileRef;
  readonly promise: Promise<Buffer>;
  resolve(value: Buffer | Promise<Buffer>): void;
  reject(err: unknown): void;
  /** Someone other than the batch awaits it (an open). */
  wanted: boolean;
  /** The batch is background prefetch (opens wait for it only while it is close and flowing). */
  readonly prefetch: boolean;
  /** This file's frame number in the batch, and the batch's progress. */
  readonly index: number;
  readonly progress: BatchProgress;
}

/** An open waits for a prefetch batch only while a frame of it arrives at least this often... */
export const BATCH_PATIENCE_MS = 50;
/** ...and its file is at most this many frames ahead. */
export const NEAR_FRAMES = 16;

/** How far one batch has got: frames delivered, and when the last one (or the request) was. */
interface BatchProgress {
  answered: number;
  lastFrameAt: number;
}

/** The batch holding `waiter` is at most NEAR_FRAMES from it and delivered a frame within BATCH_PATIENCE_MS. */
function closeAndFlowing(waiter: BatchWaiter): boolean {
  const { progress } = waiter;
  return waiter.index - progress.answered <= NEAR_FRAMES && Date.now() - progress.lastFrameAt <= BATCH_PATIENCE_MS;
}

/**
 * The bytes of a file a prefetch batch holds, for an open: the batch's
 * answer while the batch is close and flowing, else (also) the open's own
 * fetch, whichever comes first; when both fail, the own fetch's error (what
 * the open gets without batches).
 */
function behindPrefetch(waiter: BatchWaiter, own: () => Promise<Buffer>): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    let settled = false;
    let ownStarted = false;
    let ownError: unknown;
    let batchFailed = false;
    let timer: NodeJS.Timeout | undefined;
    const startOwn = () => {
      if (settled || ownStarted) return;
      ownStarted = true;
      own().then(
        (v) => {
          settled = true;
          resolve(v);
        },
        (err: unknown) => {
          ownError = err;
          if (batchFailed) reject(err);
        },
      );
    };
    const check = () => {
      if (!closeAndFlowing(waiter)) startOwn();
      else timer = setTimeout(check, BATCH_PATIENCE_MS);
    };
    check();
    waiter.promise.then(
      (v) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        batchFailed = true;
        if (!ownStarted) startOwn();
        else if (ownError !== undefined) reject(ownError);
      },
    );
  });
}

/** A file to fetch: a planned file's scope, path inside it, sha256 and size (a file node is one). */
export type FileRef = Pick<PlannedFile, 'scope' | 'scopePath' | 'sha256' | 'size'>;

export interface FetcherOptions {
  readonly client: ControlClient;
  readonly cache: ContentCache;
  readonly log?: (line: string) => void;
  /** The control plane has a newer version of `ref` than the tree. */
  readonly onStale?: (ref: FileRef) => void;
}

export class ContentFetcher {
  private readonly inflight = new Map<string, Promise<Buffer>>();
  /** sha256 → files an in-flight batch will deliver. */
  private readonly batchWaiting = new Map<string, BatchWaiter>();
  private readonly log: (line: string) => void;
  /** Running totals for metrics: requests by kind, failed ones, verified bytes, memory-cache lookups. */
  fetches = 0;
  batches = 0;
  fetchErrors = 0;
  batchErrors = 0;
  fetchedBytes = 0;
  hits = 0;
  misses = 0;
  /** Opens (not prefetch) waiting on bytes now, and when the last one stopped waiting. */
  private foreground = 0;
  private foregroundEndedAt = 0;
  private foregroundIdle: (() => void)[] = [];

  constructor(private readonly opts: FetcherOptions) {
    this.log = opts.log ?? (() => undefined);
  }

  /** Memory hit or undefined; never waits. */
  cached(sha256: string): Buffer | undefined {
    const hit = this.opts.cache.getMemory(sha256);
    if (hit !== undefined) this.hits++;
    return hit;
  }

  isCached(sha256: string): boolean {
    return this.opts.cache.hasMemory(sha256);
  }

  /** `prefetch`: background work, which neither counts as an open waiting nor bypasses a batch. */
  get(ref: FileRef, opts: { readonly prefetch?: boolean } = {}): Promise<Buffer> {
    const hit = this.opts.cache.getMemory(ref.sha256);
    if (hit !== undefined) {
      this.hits++;
      return Promise.resolve(hit);
    }
    this.misses++;
    const prefetch = opts.prefetch === true;
    const waiter = this.inflight.has(ref.sha256) ? undefined : this.batchWaiting.get(ref.sha256);
    let answer: Promise<Buffer>;
    if (waiter !== undefined) {
      waiter.wanted = true;
      answer = waiter.prefetch && !prefetch ? behindPrefetch(waiter, () => this.loadShared(ref)) : waiter.promise;
    } else {
      answer = this.loadShared(ref);
    }
    if (prefetch) return answer;
    this.foreground++;
    return answer.finally(() => {
      if (--this.foreground > 0) return;
      this.foregroundEndedAt = Date.now();
      for (const wake of this.foregroundIdle.splice(0)) wake();
    });
  }

  /**
   * Resolves once no open has waited on bytes for `quietMs` (at once when
   * none has lately), or when `signal` aborts: the prefetcher calls it before
   * each request so background fetches never compete with an agent's opens.
   */
  async foregroundQuiet(quietMs: number, signal?: AbortSignal): Promise<void> {
    while (!signal?.aborted) {
      if (this.foreground > 0) {
        await new Promise<void>((resolve) => this.foregroundIdle.push(resolve));
        continue;
      }
      const left = this.foregroundEndedAt + quietMs - Date.now();
      if (left <= 0) return;
      await abortableSleep(left, signal);
    }
  }

  /** One fetch per sha256 at a time: a second caller shares the first's. */
  private loadShared(ref: FileRef): Promise<Buffer> {
    let pending = this.inflight.get(ref.sha256);
    if (pending === undefined) {
      pending = this.load(ref).finally(() => this.inflight.delete(ref.sha256));
      this.inflight.set(ref.sha256, pending);
    }
    return pending;
  }

  /**
   * Fetches `refs` (all of `scope`) in one batch request when the client can.
   * Never throws: the outcome says what was fetched and what is left.
   */
  async fetchBatch(scope: string, refs: readonly FileRef[], signal?: AbortSignal, prefetch = false): Promise<BatchOutcome> {
    const batch = this.opts.client.batch?.bind(this.opts.client);
    if (batch === undefined) return { fetched: [], failed: [], skipped: refs, unanswered: [] };
    const { cache } = this.opts;
    // Waiters are registered synchronously, before the first await: an open right after this call finds them.
    const skipped: FileRef[] = [];
    const waiters: BatchWaiter[] = [];
    const progress: BatchProgress = { answered: 0, lastFrameAt: Date.now() };
    for (const ref of refs) {
      const sha = ref.sha256;
      const held = this.batchWaiting.get(sha);
      // A read-ahead takes over files a prefetch batch holds but is not close to: opens then wait for the read-ahead.
      const takeOver = held !== undefined && held.prefetch && !prefetch && !closeAndFlowing(held);
      if (ref.scope !== scope || cache.hasMemory(sha) || cache.hasDisk(sha) || this.inflight.has(sha) || (held !== undefined && !takeOver)) {
        skipped.push(ref);
        continue;
      }
      let resolve!: BatchWaiter['resolve'];
      let reject!: BatchWaiter['reject'];
      const promise = new Promise<Buffer>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      promise.catch(() => undefined); // a rejection nobody awaits is not an error
      const waiter: BatchWaiter = { ref, promise, resolve, reject, wanted: false, prefetch, index: waiters.length, progress };
      this.batchWaiting.set(sha, waiter);
      waiters.push(waiter);
    }
    if (waiters.length === 0) return { fetched: [], failed: [], skipped, unanswered: [] };
    this.batches++;
    const fetched: FileRef[] = [];
    const failed: FileRef[] = [];
    let answered = 0;
    let error: unknown;
    const maxFileBytes = waiters.reduce((m, w) => Math.max(m, w.ref.size), 0);
    try {
      for await (const item of batch(scope, waiters.map((w) => w.ref.scopePath), { maxFileBytes, signal, prefetch })) {
        const waiter = waiters[answered++] as BatchWaiter;
        progress.answered = answered;
        progress.lastFrameAt = Date.now();
        const { ref } = waiter;
        if (this.batchWaiting.get(ref.sha256) === waiter) this.batchWaiting.delete(ref.sha256);
        const where = `${ref.scope}/${ref.scopePath}`;
        if (item.missing) {
          failed.push(ref);
          this.opts.onStale?.(ref);
          waiter.reject(new KnowledgeError('not_found', `no such file: ${where}`));
        } else if (item.sha256 === ref.sha256 && item.body.length === ref.size) {
          this.fetchedBytes += item.body.length;
          cache.put(ref.sha256, item.body);
          fetched.push(ref);
          waiter.resolve(item.body);
        } else {
          // Verified against its own header: valid bytes of a newer version.
          cache.put(item.sha256, item.body);
          failed.push(ref);
          this.opts.onStale?.(ref);
          waiter.reject(new KnowledgeError('unavailable', `${where} changed on the control plane since the last plan; refreshing`));
        }
      }
    } catch (err) {
      error = err;
      this.batchErrors++;
    }
    const unanswered: FileRef[] = [];
    for (const waiter of waiters.slice(answered)) {
      if (this.batchWaiting.get(waiter.ref.sha256) === waiter) this.batchWaiting.delete(waiter.ref.sha256);
      unanswered.push(waiter.ref);
      // An open waiting on this file goes the per-file way now.
      if (waiter.wanted) waiter.resolve(this.get(waiter.ref, { prefetch: true }));
      else waiter.reject(error);
    }
    return { fetched, failed, skipped, unanswered, ...(error !== undefined ? { error } : {}) };
  }

  private async load(ref: FileRef): Promise<Buffer> {
    const fromDisk = await this.opts.cache.get(ref.sha256);
    if (fromDisk !== undefined) return fromDisk;
    this.fetches++;
    let reply: Awaited<ReturnType<ControlClient['file']>>;
    try {
      reply = await this.opts.client.file(ref.scope, ref.scopePath, ref.size, ref.sha256);
    } catch (err) {
      this.fetchErrors++;
      // More bytes than the plan says: most likely the file grew since the plan.
      if (isKnowledgeError(err) && err.code === 'integrity') this.opts.onStale?.(ref);
      throw err;
    }
    const { body, sha256: claimed } = reply;
    const actual = reply.actual ?? sha256Hex(body);
    if (actual === ref.sha256 && body.length === ref.size) {
      this.fetchedBytes += body.length;
      this.opts.cache.put(actual, body);
      return body;
    }
    this.fetchErrors++;
    const where = `${ref.scope}/${ref.scopePath}`;
    if (claimed !== undefined && claimed === actual) {
      this.opts.cache.put(actual, body);
      this.opts.onStale?.(ref);
      throw new KnowledgeError('unavailable', `${where} changed on the control plane since the last plan; refreshing`);
    }
    this.opts.onStale?.(ref);
    this.log(`integrity: ${where}: received ${body.length} bytes with sha256 ${actual.slice(0, 12)}…, expected ${ref.size} bytes with ${ref.sha256.slice(0, 12)}…; refused`);
    throw new KnowledgeError('integrity', `${where}: bytes from the control plane do not match the plan's sha256`);
  }
}

