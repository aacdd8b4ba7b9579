// File bytes by sha256: a memory LRU bounded by --cache-size, with an
// optional write-through spill to --cache-dir.
//
// Content-addressed, so a cached body can never belong to the wrong version
// of a file: a new version has a new key. Disk files are named by their
// sha256 and checked against it when read back; a corrupt or truncated file
// is deleted and reported as a miss, so the caller refetches. Disk write
// failures (full disk, permissions) are logged once and the cache carries on
// in memory only. The disk side is bounded too (--cache-dir-size): an LRU
// index of the files, filled from a scan of the directory at start (files of
// earlier runs count) and from writes; evicted files are deleted.

import { mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { isSha256, sha256Hex } from '../../core/sha256.js';

export interface ContentCacheOptions {
  /** Memory bound in bytes (--cache-size). */
  readonly maxBytes: number;
  /** Spill directory (--cache-dir); none = memory only. */
  readonly dir?: string | undefined;
  /** Disk bound in bytes (--cache-dir-size, default 1 GiB). */
  readonly dirMaxBytes?: number;
  readonly log?: (line: string) => void;
}

export const DEFAULT_CACHE_DIR_SIZE = 1024 ** 3;

export class ContentCache {
  private readonly memory: LRUCache<string, Buffer> | undefined;
  private readonly dir: string | undefined;
  private readonly log: (line: string) => void;
  /** sha256 → size of the files on disk, least recently used first out (and deleted). */
  private readonly onDisk: LRUCache<string, number>;
  /** Resolves when the start-up scan of --cache-dir has indexed what is there. */
  readonly scanned: Promise<void>;
  private diskBroken = false;
  private tmpSeq = 0;
  /** Background disk writes and evictions in flight: write-through never delays a reader. */
  private readonly pendingWrites = new Set<Promise<void>>();
  private memoryBytes = 0;

  constructor(opts: ContentCacheOptions) {
    this.dir = opts.dir;
    this.log = opts.log ?? (() => undefined);
    this.onDisk = new LRUCache<string, number>({
      maxSize: Math.max(1, opts.dirMaxBytes ?? DEFAULT_CACHE_DIR_SIZE),
      sizeCalculation: (size) => Math.max(1, size),
      dispose: (_size, sha256, reason) => {
        if (reason === 'evict') this.trackWrite(unlink(this.pathFor(sha256)).catch(() => undefined));
      },
    });
    this.scanned = this.dir === undefined ? Promise.resolve() : this.scan(this.dir);
    if (opts.maxBytes > 0) {
      this.memory = new LRUCache<string, Buffer>({
        maxSize: opts.maxBytes,
        sizeCalculation: (buf) => Math.max(1, buf.length),
        dispose: (buf) => {
          this.memoryBytes -= buf.length;
        },
      });
    }
  }

  /** Memory only, synchronous: the hot path. */
  getMemory(sha256: string): Buffer | undefined {
    return this.memory?.get(sha256);
  }

  hasMemory(sha256: string): boolean {
    return this.memory?.has(sha256) ?? false;
  }

  /** True when --cache-dir probably holds the file (indexed; verified only when read). */
  hasDisk(sha256: string): boolean {
    return this.dir !== undefined && this.onDisk.has(sha256);
  }

  /** Memory, then disk (verified). Undefined = fetch it. */
  async get(sha256: string): Promise<Buffer | undefined> {
    const hit = this.memory?.get(sha256);
    if (hit !== undefined) return hit;
    if (this.dir === undefined) return undefined;
    // Let the start-up scan finish first, or it could index a file this call
    // is about to delete as corrupt (and the refetched bytes would never be written).
    await this.scanned;
    const file = this.pathFor(sha256);
    let buf: Buffer;
    try {
      buf = await readFile(file);
    } catch {
      this.onDisk.delete(sha256);
      return undefined;
    }
    if (sha256Hex(buf) !== sha256) {
      this.onDisk.delete(sha256);
      this.log(`cache: ${file} does not match its sha256; deleted, refetching`);
      await unlink(file).catch(() => undefined);
      return undefined;
    }
    this.onDisk.set(sha256, buf.length);
    this.remember(sha256, buf);
    return buf;
  }

  /** Stores verified bytes (the caller checked `sha256`). */
  put(sha256: string, buf: Buffer): void {
    this.remember(sha256, buf);
    if (this.dir !== undefined && !this.diskBroken && !this.onDisk.has(sha256)) {
      this.onDisk.set(sha256, buf.length);
      if (this.onDisk.has(sha256)) this.trackWrite(this.writeDisk(sha256, buf)); // else larger than the whole disk bound: not kept
    }
  }

  /** Resolves once every disk write or eviction started so far has landed (or failed and been logged). */
  async whenWritten(): Promise<void> {
    await Promise.all([...this.pendingWrites]);
  }

  private trackWrite(write: Promise<void>): void {
    this.pendingWrites.add(write);
    void write.finally(() => this.pendingWrites.delete(write));
  }

  stats(): { entries: number; bytes: number; diskEntries: number; diskBytes: number } {
    return { entries: this.memory?.size ?? 0, bytes: this.memoryBytes, diskEntries: this.onDisk.size, diskBytes: this.onDisk.calculatedSize };
  }

  /** Indexes files left by earlier runs (so the bound counts them) and removes stray temp files. */
  private async scan(dir: string): Promise<void> {
    let subdirs: string[];
    try {
      subdirs = await readdir(dir);
    } catch {
      return; // created on first write
    }
    for (const sub of subdirs) {
      if (!/^[0-9a-f]{2}$/.test(sub)) continue;
      let names: string[];
      try {
        names = await readdir(join(dir, sub));
      } catch {
        continue;
      }
      for (const name of names) {
        const file = join(dir, sub, name);
        if (name.endsWith('.tmp')) {
          await unlink(file).catch(() => undefined);
          continue;
        }
        if (!isSha256(name) || this.onDisk.has(name)) continue;
        const st = await stat(file).catch(() => undefined);
        if (st?.isFile()) this.onDisk.set(name, st.size, { noUpdateTTL: true });
      }
    }
  }

  pathFor(sha256: string): string {
    return join(this.dir ?? '', sha256.slice(0, 2), sha256);
  }

  private remember(sha256: string, buf: Buffer): void {
    if (this.memory === undefined || this.memory.has(sha256)) return;
    if (this.memory.set(sha256, buf).has(sha256)) this.memoryBytes += buf.length;
  }

  private async writeDisk(sha256: string, buf: Buffer): Promise<void> {
    const file = this.pathFor(sha256);
    const tmp = `${file}.${process.pid}-${++this.tmpSeq}.tmp`;
    // The start-up scan deletes stray temp files: a write racing it would lose its own.
    await this.scanned;
    try {
      // Write first, create the fan-out directory only when it is missing: one syscall less per file.
      await writeFile(tmp, buf, { mode: 0o600 }).catch(async (err: unknown) => {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        await mkdir(join(this.dir ?? '', sha256.slice(0, 2)), { recursive: true, mode: 0o700 });
        await writeFile(tmp, buf, { mode: 0o600 });
      });
      await rename(tmp, file);
    } catch (err) {
      this.onDisk.delete(sha256);
      await unlink(tmp).catch(() => undefined);
      if (!this.diskBroken) {
        this.diskBroken = true;
        this.log(`cache: cannot write to --cache-dir ${this.dir} (${err instanceof Error ? err.message : String(err)}); caching in memory only`);
        // Try again later: a full disk may get space back.
        setTimeout(() => { this.diskBroken = false; }, 30_000).unref();
      }
    }
  }
}
