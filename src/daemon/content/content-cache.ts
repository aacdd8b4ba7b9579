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
//
// The directory may be on a shared machine, so nothing in it is trusted by
// name (src/disk/): the directory must be ours (refused at start otherwise),
// each fan-out subdirectory is created 0700 and checked, temp files have
// random names and are created exclusively, and a cache file is read only
// when it is a regular file of ours, opened without following a link or
// blocking on a FIFO. Anything else there is a miss (logged once, removed).

import { lstat, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { isSha256, sha256Hex } from '../../core/sha256.js';
import { randomTempName, readPrivateFile, writePrivateFile } from '../../disk/private-file.js';
import { subdirectoryProblem } from '../../disk/trusted-directory.js';
import { prepareCacheDirectory } from './cache-directory.js';

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
const FAN_OUT_NAME = /^[0-9a-f]{2}$/;
/** Refusals logged (each entry once); past this many, the set starts over. */
const MAX_LOGGED = 1000;

export class ContentCache {
  private readonly memory: LRUCache<string, Buffer> | undefined;
  private readonly dir: string | undefined;
  private readonly log: (line: string) => void;
  /** sha256 → size of the files on disk, least recently used first out (and deleted). */
  private readonly onDisk: LRUCache<string, number>;
  /** Resolves when the start-up scan of --cache-dir has indexed what is there. */
  readonly scanned: Promise<void>;
  private diskBroken = false;
  private readonly uid = process.getuid?.() ?? 0;
  /** Fan-out subdirectories checked (value: undefined = ours, else why not). */
  private readonly subdirs = new Map<string, string | undefined>();
  private readonly logged = new Set<string>();
  /** Background disk writes and evictions in flight: write-through never delays a reader. */
  private readonly pendingWrites = new Set<Promise<void>>();
  private memoryBytes = 0;

  /** Throws a `config` KnowledgeError when `opts.dir` is a directory another user could change. */
  constructor(opts: ContentCacheOptions) {
    this.dir = opts.dir === undefined ? undefined : prepareCacheDirectory(opts.dir);
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
    if ((await this.subdirFor(sha256, false)) !== undefined) {
      this.onDisk.delete(sha256);
      return undefined;
    }
    const read = await readPrivateFile(file, this.uid);
    if (read.kind !== 'bytes') {
      this.onDisk.delete(sha256);
      if (read.kind === 'refused') {
        this.logOnce(`cache: ${file} is ${read.why}, not a file of this daemon's; removed, refetching`);
        await unlink(file).catch(() => undefined);
      }
      return undefined;
    }
    const buf = read.bytes;
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
      if (!FAN_OUT_NAME.test(sub)) continue;
      if ((await this.subdirFor(sub, false)) !== undefined) continue;
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
        // lstat: a link is not indexed (reading it back would refuse it anyway).
        const st = await lstat(file).catch(() => undefined);
        if (st?.isFile() && st.uid === this.uid) this.onDisk.set(name, st.size, { noUpdateTTL: true });
      }
    }
  }

  pathFor(sha256: string): string {
    return join(this.dir ?? '', sha256.slice(0, 2), sha256);
  }

  /**
   * Undefined when the fan-out subdirectory of `sha256` (or the name `sub`)
   * is ours, else why not (logged once). `create`: make it when missing.
   */
  private async subdirFor(shaOrSub: string, create: boolean): Promise<string | undefined> {
    const sub = shaOrSub.slice(0, 2);
    if (this.subdirs.has(sub)) return this.subdirs.get(sub);
    const path = join(this.dir ?? '', sub);
    let problem: string | undefined;
    try {
      problem = await subdirectoryProblem(path, this.uid, create);
    } catch (err) {
      // Missing (not made yet) or not creatable now (a full disk): not remembered, tried again next time.
      if (create) throw err;
      return `${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    }
    if (problem !== undefined) this.logOnce(`cache: not using ${path}: ${problem} (remove it; the cache makes its own, mode 0700)`);
    this.subdirs.set(sub, problem);
    return problem;
  }

  private logOnce(line: string): void {
    if (this.logged.has(line)) return;
    if (this.logged.size >= MAX_LOGGED) this.logged.clear();
    this.logged.add(line);
    this.log(line);
  }

  private remember(sha256: string, buf: Buffer): void {
    if (this.memory === undefined || this.memory.has(sha256)) return;
    if (this.memory.set(sha256, buf).has(sha256)) this.memoryBytes += buf.length;
  }

  private async writeDisk(sha256: string, buf: Buffer): Promise<void> {
    const file = this.pathFor(sha256);
    // The start-up scan deletes stray temp files: a write racing it would lose its own.
    await this.scanned;
    try {
      // Checked once per fan-out directory (then remembered): one lstat per 256 files at most.
      const problem = await this.subdirFor(sha256, true);
      if (problem !== undefined) {
        this.onDisk.delete(sha256);
        return;
      }
      await writePrivateFile(randomTempName(file), file, buf).catch(async (err: unknown) => {
        // The fan-out directory was removed since it was checked (the operator emptied the cache): once more.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        this.subdirs.delete(sha256.slice(0, 2));
        if ((await this.subdirFor(sha256, true)) !== undefined) throw err;
        await writePrivateFile(randomTempName(file), file, buf);
      });
    } catch (err) {
      this.onDisk.delete(sha256);
      if (!this.diskBroken) {
        this.diskBroken = true;
        this.log(`cache: cannot write to --cache-dir ${this.dir} (${err instanceof Error ? err.message : String(err)}); caching in memory only`);
        // Try again later: a full disk may get space back.
        setTimeout(() => { this.diskBroken = false; }, 30_000).unref();
      }
    }
  }
}
