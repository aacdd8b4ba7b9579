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
//
// The disk directory is checked like the control socket's (src/disk/): it
// must be ours, or the server does not start; temp files have random names,
// created exclusively without following a link; a file is read back only
// when it is a regular file of ours, opened without blocking on a FIFO.

import { lstatSync, readdirSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { isSha256, sha256Hex } from '../../core/sha256.js';
import { randomTempName, readPrivateFile, writePrivateFile } from '../../disk/private-file.js';
import { prepareTrustedDirectory, type DirectoryUse } from '../../disk/trusted-directory.js';

const BLOB_CACHE_DIRECTORY: DirectoryUse = {
  what: 'blob cache directory (--blob-cache-dir)',
  risk: 'another local user could plant links or FIFOs there and make the server overwrite any file, or hang',
  fix: 'Remove the directory (it is created again with mode 0700), or choose a --blob-cache-dir only you (or root) can write',
};

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
  // Stryker disable next-line LogicalOperator,OptionalChaining: process.getuid exists on every platform the server runs on (Linux)
  private readonly uid = process.getuid?.() ?? 0;
  /** `options.diskDir`, absolute and checked. */
  private readonly diskDir: string | undefined;
  private readonly refusedLogged = new Set<string>();
  /** Memory lookups that found the blob, and those that did not (metrics). */
  hits = 0;
  misses = 0;

  /** Throws a `config` KnowledgeError when `options.diskDir` is a directory another user could change. */
  constructor(private readonly options: BlobCacheOptions) {
    const diskDir = options.diskDir === undefined ? undefined : prepareTrustedDirectory(options.diskDir, this.uid, BLOB_CACHE_DIRECTORY);
    this.diskDir = diskDir;
    this.disk =
      diskDir === undefined
        ? null
        : new LRUCache<string, number>({
            maxSize: Math.max(1, options.diskBytes ?? 1024 ** 3),
            sizeCalculation: (size) => Math.max(1, size),
            dispose: (_size, sha, reason) => {
              // Stryker disable next-line ConditionalExpression,StringLiteral: 'set' comes only when two spills of one blob race (spill checks first); unlinking then costs a fetch, never a wrong byte
              if (reason !== 'set') void unlink(join(diskDir, sha)).catch(() => undefined);
            },
          });
    this.memory = new LRUCache<string, Buffer>({
      maxSize: Math.max(1, options.memoryBytes),
      sizeCalculation: (bytes) => Math.max(1, bytes.length),
      dispose: (bytes, sha, reason) => {
        // Stryker disable next-line ConditionalExpression: memory entries are only ever evicted (never deleted, never set again: misses are single-flight)
        if (reason === 'evict') this.spill(sha, bytes);
      },
    });
    if (diskDir !== undefined) this.adoptDisk(diskDir);
  }

  /** Files left by an earlier run are reused (verified when read, like any other): our regular files only, never a link. */
  private adoptDisk(dir: string): void {
    for (const name of readdirSync(dir)) {
      if (!isSha256(name)) continue;
      const st = lstatSync(join(dir, name), { throwIfNoEntry: false });
      if (st?.isFile() && st.uid === this.uid) this.disk?.set(name, st.size);
    }
  }

  private spill(sha: string, bytes: Buffer): void {
    const dir = this.diskDir;
    if (dir === undefined || this.disk === null || this.disk.has(sha)) return;
    void writePrivateFile(randomTempName(join(dir, `.${sha}`)), join(dir, sha), bytes)
      .then(
        () => this.disk?.set(sha, bytes.length),
        (err: unknown) => {
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
    const dir = this.diskDir;
    if (dir === undefined || this.disk?.get(sha) === undefined) return null;
    const file = join(dir, sha);
    const read = await readPrivateFile(file, this.uid);
    if (read.kind !== 'bytes') {
      this.disk.delete(sha); // deletes the file too, when it is there
      if (read.kind === 'refused' && !this.refusedLogged.has(file)) {
        // Stryker disable next-line ConditionalExpression,EqualityOperator: a bound on memory only; which lines are logged once stays the same
        if (this.refusedLogged.size >= 1000) this.refusedLogged.clear();
        this.refusedLogged.add(file);
        this.options.log(`blob cache: ${file} is ${read.why}, not a file of this server's; removed, fetching the blob again`);
      }
      return null;
    }
    const bytes = read.bytes;
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
