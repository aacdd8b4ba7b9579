// A bounded local cache of blobs (file bytes by sha256) for replicas that
// serve packs from object storage.
//
// Memory: an LRU bounded in bytes (lru-cache). Optional disk spill: a blob
// evicted from memory is written to `diskDir/<sha256>` (also LRU-bounded in
// bytes; the oldest files are deleted), and read back from there before
// asking the store again. Every blob is verified against its sha256 when it
// enters the cache and again when it is read back from disk: a mismatch is
// never served (fetched: an integrity error; on disk: the file is dropped and
// the blob fetched again). Concurrent misses for one blob share one fetch.

import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { isSha256, sha256Hex } from '../../core/sha256.js';

export interface BlobCacheOptions {
  /** Bytes kept in memory. Blobs larger than this are never kept in memory. */
  readonly memoryBytes: number;
  /** Spill directory for blobs evicted from memory; absent = no disk spill. */
  readonly diskDir?: string | undefined;
  /** Bytes kept on disk. */
  readonly diskBytes?: number;
  /** Fetches the blob's bytes from the store (verified here, not there). */
  readonly fetch: (sha256: string, size: number) => Promise<Buffer>;
  /** Called with bytes that did not match their sha256 (the caller decides the error). */
  readonly corrupt: (sha256: string, actual: string, source: 'store' | 'disk') => Error;
  readonly log: (line: string) => void;
}

export class BlobCache {
  private readonly memory: LRUCache<string, Buffer>;
  private readonly disk: LRUCache<string, number> | null;
  private readonly inflight = new Map<string, Promise<Buffer>>();
  /** Memory lookups that found the blob, and those that did not (metrics). */
  hits = 0;
  misses = 0;

  constructor(private readonly options: BlobCacheOptions) {
    const diskDir = options.diskDir;
    this.disk =
      diskDir === undefined
        ? null
        : new LRUCache<string, number>({
            maxSize: Math.max(1, options.diskBytes ?? 1024 ** 3),
            sizeCalculation: (size) => Math.max(1, size),
            dispose: (_size, sha, reason) => {
              if (reason !== 'set') void unlink(join(diskDir, sha)).catch(() => undefined);
            },
          });
    this.memory = new LRUCache<string, Buffer>({
      maxSize: Math.max(1, options.memoryBytes),
      sizeCalculation: (bytes) => Math.max(1, bytes.length),
      dispose: (bytes, sha, reason) => {
        if (reason === 'evict') this.spill(sha, bytes);
      },
    });
    if (diskDir !== undefined) this.adoptDisk(diskDir);
  }

  /** Files left by an earlier run are reused (verified when read, like any other). */
  private adoptDisk(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(dir)) {
      if (!isSha256(name)) continue;
      const size = statSync(join(dir, name), { throwIfNoEntry: false })?.size;
      if (size !== undefined) this.disk?.set(name, size);
    }
  }

  private spill(sha: string, bytes: Buffer): void {
    const dir = this.options.diskDir;
    if (dir === undefined || this.disk === null || this.disk.has(sha)) return;
    const tmp = join(dir, `.${sha}.${process.pid}.tmp`);
    void writeFile(tmp, bytes, { mode: 0o600 })
      .then(() => rename(tmp, join(dir, sha)))
      .then(
        () => this.disk?.set(sha, bytes.length),
        (err: unknown) => {
          void unlink(tmp).catch(() => undefined);
          this.options.log(`blob cache: cannot write ${dir}: ${err instanceof Error ? err.message : String(err)} (the blob stays uncached)`);
        },
      );
  }

  /** The blob if it is in memory now (no I/O): the fast path of small reads. */
  peek(sha: string): Buffer | undefined {
    const hit = this.memory.get(sha);
    if (hit !== undefined) this.hits++;
    return hit;
  }

  /** The blob's verified bytes: from memory, from disk, or fetched. */
  get(sha: string, size: number): Promise<Buffer> {
    const hit = this.memory.get(sha);
    if (hit !== undefined) {
      this.hits++;
      return Promise.resolve(hit);
    }
    this.misses++;
    let pending = this.inflight.get(sha);
    if (pending === undefined) {
      pending = this.load(sha, size).finally(() => this.inflight.delete(sha));
      this.inflight.set(sha, pending);
    }
    return pending;
  }

  private async load(sha: string, size: number): Promise<Buffer> {
    const fromDisk = await this.readDisk(sha);
    if (fromDisk !== null) {
      this.memory.set(sha, fromDisk);
      return fromDisk;
    }
    const bytes = await this.options.fetch(sha, size);
    const actual = sha256Hex(bytes);
    if (actual !== sha) throw this.options.corrupt(sha, actual, 'store');
    // Too big for memory: straight to disk (when there is one).
    if (bytes.length > this.options.memoryBytes) this.spill(sha, bytes);
    else this.memory.set(sha, bytes);
    return bytes;
  }

  private async readDisk(sha: string): Promise<Buffer | null> {
    const dir = this.options.diskDir;
    if (dir === undefined || this.disk?.get(sha) === undefined) return null;
    let bytes: Buffer;
    try {
      bytes = await readFile(join(dir, sha));
    } catch {
      this.disk.delete(sha);
      return null;
    }
    const actual = sha256Hex(bytes);
    if (actual === sha) return bytes;
    this.options.log(String(this.options.corrupt(sha, actual, 'disk').message));
    this.disk.delete(sha);
    return null;
  }

  /** Bytes held in memory and on disk. */
  get size(): { memoryBytes: number; diskBytes: number } {
    return { memoryBytes: this.memory.calculatedSize, diskBytes: this.disk?.calculatedSize ?? 0 };
  }
}
