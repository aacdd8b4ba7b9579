// The embedded pack store: DATA/account/ and DATA/teams/<id>/ on local disk.
//
// A team pack is any directory DATA/teams/<id>/ whose name is a valid team id
// (listed in directory.json or not: the directory is the pack). Scans walk
// every pack, skip what can't be served (symlinks, non-regular files, bad or
// non-UTF-8 names, over-long paths, files above maxFileSize) with ONE log line
// per path for the life of the process, and hash only files whose
// (ino, size, mtimeMs, ctimeMs) changed since the last scan, so rescanning an
// unchanged tree costs one lstat per file (and an unchanged pack keeps its
// snapshot object: no re-sort, no re-hash of the version). Scans run in time
// slices (scan-slices.ts) so requests keep being served during a scan.
//
// `read` opens the file without following symlinks, checks its directory is
// still inside the pack, hashes the bytes it read and, if they no longer match
// the snapshot, updates the snapshot and answers with the fresh hash: bytes
// and hash always belong together. `readSmallSync` is the same for files of
// at most SYNC_HASH_BYTES (POST /v1/batch reads thousands of them).
//
// `scan(packs)` rescans only the named directories of the named packs (each
// with everything below it; and which packs exist); an observer
// (data-watch.ts) is told of every directory before it is listed, so a watch
// placed then misses nothing the listing did not already see.

import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { packPathProblem } from '../../core/paths.js';
import type { PlanFile, ScopeSnapshot } from '../../core/session/plan.js';
import { ACCOUNT_SCOPE, compareScopes, isValidTeamId, teamScope, type ScopeName } from '../../core/scope.js';
import type { PackFile, PackStore } from '../pack-store.js';
import { createSlicer, fingerprint, sameFingerprint, type Fingerprint, type Slicer } from './scan-slices.js';
import { hashFile, insidePack, PackEntries } from './dir-pack-entries.js';
import { type DirPackStoreOptions, type IndexEntry, type ScopeIndex, type SeenEntry, SYNC_HASH_BYTES, indexOf, outermost, scopeDir } from './dir-pack-index.js';
export { scopeDir, type DirPackStoreOptions, type ScanObserver } from './dir-pack-index.js';

export class DirPackStore implements PackStore {
  private indexes = new Map<ScopeName, ScopeIndex>();
  private sorted: ScopeSnapshot[] = [];
  private readonly disk: PackEntries;
  private realRoot: string | null = null;
  private scanning: Promise<boolean> | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  generation = 0;

  constructor(
    readonly root: string,
    private readonly options: DirPackStoreOptions,
  ) {
    this.disk = new PackEntries(options);
  }

  scopes(): readonly ScopeSnapshot[] {
    return this.sorted;
  }

  snapshot(scope: ScopeName): ScopeSnapshot | undefined {
    return this.indexes.get(scope)?.snapshot;
  }

  /**
   * Scans every pack, or only `packs`: per pack, directories relative to it
   * ('' = the whole pack), each rescanned with everything below it; a pack
   * that appeared is scanned whole, one that is gone dropped. True when any
   * snapshot changed. Scans run one after another; concurrent full scans
   * share one.
   */
  scan(packs?: ReadonlyMap<ScopeName, ReadonlySet<string>>): Promise<boolean> {
    if (packs !== undefined) return this.enqueue(() => this.doScan(packs));
    this.scanning ??= this.enqueue(() => this.doScan()).finally(() => {
      this.scanning = null;
    });
    return this.scanning;
  }

  private enqueue(run: () => Promise<boolean>): Promise<boolean> {
    const next = this.queue.then(run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private packRoots(): { scope: ScopeName; dir: string }[] {
    this.realRoot ??= realpathSync(this.root);
    const roots: { scope: ScopeName; dir: string }[] = [];
    this.options.observer?.listing(this.root, null);
    const account = join(this.root, 'account');
    const accountStat = this.disk.lstatOrSkip(account);
    if (accountStat?.isDirectory()) roots.push({ scope: ACCOUNT_SCOPE, dir: account });
    else if (accountStat) this.disk.skip(account, 'not a directory (symlinks are not followed)');
    const teamsDir = join(this.root, 'teams');
    const teamsStat = this.disk.lstatOrSkip(teamsDir);
    if (teamsStat === undefined) return roots;
    if (!teamsStat.isDirectory()) {
      // Reads never follow it either: a symlinked teams/ would list another tree's files that no read can serve.
      this.disk.skip(teamsDir, teamsStat.isSymbolicLink() ? 'symlink (not followed): no team packs are served' : 'not a directory: no team packs are served');
      return roots;
    }
    this.options.observer?.listing(teamsDir, null);
    for (const entry of this.disk.listDir(teamsDir) ?? []) {
      const name = this.disk.decodeName(teamsDir, entry.name);
      if (name === null) continue;
      const dir = join(teamsDir, name);
      if (!isValidTeamId(name)) {
        this.disk.skip(dir, entry.isDirectory() ? 'not a valid team id (expected [a-z0-9][a-z0-9_-]{0,62})' : 'not a team directory');
        continue;
      }
      if (!entry.isDirectory()) {
        this.disk.skip(dir, entry.isSymbolicLink() ? 'symlink (not followed)' : 'not a directory');
        continue;
      }
      roots.push({ scope: teamScope(name), dir });
    }
    return roots;
  }

  /**
   * Walks one pack: sync readdir/lstat in time slices (yielding to the event
   * loop every SLICE_MS), so an unchanged tree costs one lstat per file and
   * no promise per file. Returns null when nothing changed since `old`.
   */
  private async scanPack(
    scope: ScopeName,
    dir: string,
    old: ScopeIndex | undefined,
    slice: Slicer,
    subtrees: readonly string[] = [''],
  ): Promise<ScopeIndex | null> {
    const entries: IndexEntry[] = [];
    // Stryker disable next-line ArrayDeclaration: a made-up first element has no path to hash (hashFile answers null) and is dropped
    const toHash: { abs: string; rel: string; st: Fingerprint; size: number; mtimeMs: number }[] = [];
    let dirty = old === undefined;
    let reused = 0;
    const observer = this.options.observer;
    const listed = new Set<string>();
    // Stryker disable next-line StringLiteral: without it, '' still walks the whole pack (insidePack is false for it)
    const whole = old === undefined || subtrees.includes('') || !insidePack(dir, subtrees);
    const tops = whole ? [''] : outermost(subtrees);
    if (!whole && old !== undefined) {
      // Files outside the rescanned directories stay as they are.
      for (const e of old.byPath.values()) {
        if (!tops.some((t) => e.file.path.startsWith(`${t}/`))) {
          entries.push(e);
          reused++;
        }
      }
    }
    const stack = tops.map((rel) => ({ abs: rel === '' ? dir : `${dir}/${rel}`, rel }));
    while (stack.length > 0) {
      const d = stack.pop() as { abs: string; rel: string };
      // Stryker disable next-line ConditionalExpression: yielding more or less often changes when requests are served, not the scan's result
      if (slice.due()) await slice.yield();
      if (observer) {
        observer.listing(d.abs, scope);
        listed.add(d.abs);
      }
      for (const entry of this.disk.listDir(d.abs) ?? []) {
        // Stryker disable next-line ConditionalExpression: yielding more or less often changes when requests are served, not the scan's result
        if (slice.due()) await slice.yield();
        const name = this.disk.decodeName(d.abs, entry.name);
        if (name === null) continue;
        const abs = `${d.abs}/${name}`;
        const rel = d.rel === '' ? name : `${d.rel}/${name}`;
        let seen: SeenEntry;
        try {
          seen = this.disk.visit(entry, name, abs, rel);
        } catch (err) {
          // One entry's error (ENAMETOOLONG past PATH_MAX, EACCES, EIO…) skips that entry, never the pack.
          this.disk.skip(abs, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
          continue;
        }
        if (seen === 'skip') continue;
        if (seen === 'dir') {
          stack.push({ abs, rel });
          continue;
        }
        const previous = old?.byPath.get(rel);
        if (previous === undefined || previous.fp === null || !sameFingerprint(previous.fp, seen)) {
          toHash.push({ abs, rel, st: seen, size: seen.size, mtimeMs: Math.floor(seen.mtimeMs) });
          dirty = true;
          continue;
        }
        entries.push(previous);
        reused++;
      }
    }
    for (const f of toHash) {
      // Stryker disable next-line ConditionalExpression: yielding more or less often changes when requests are served, not the scan's result
      if (slice.due()) await slice.yield();
      const sha256 = await hashFile(f.abs, f.size);
      if (sha256 === null) continue; // vanished or replaced while hashing: the next scan sees it
      entries.push({ file: { path: f.rel, size: f.size, mtimeMs: f.mtimeMs, sha256 }, fp: fingerprint(f.st) });
    }
    observer?.packScanned(scope, listed, tops.map((rel) => (rel === '' ? dir : `${dir}/${rel}`)));
    if (!dirty && old !== undefined && reused === old.snapshot.files.length) return null;
    return indexOf(scope, entries);
  }

  private async doScan(only?: ReadonlyMap<ScopeName, ReadonlySet<string>>): Promise<boolean> {
    const slice = createSlicer();
    const roots = this.packRoots();
    this.options.observer?.packsPresent(new Set(roots.map((r) => r.scope)));
    const next = new Map<ScopeName, ScopeIndex>();
    let changed = roots.length !== this.indexes.size;
    const kept: ScopeName[] = [];
    for (const r of roots) {
      const old = this.indexes.get(r.scope);
      if (only !== undefined && old !== undefined && !only.has(r.scope)) {
        kept.push(r.scope);
        continue;
      }
      // Stryker disable next-line StringLiteral: a pack the scan does not name gets here only when it is new, and a new pack is walked whole
      const index = await this.scanPack(r.scope, r.dir, old, slice, only ? [...(only.get(r.scope) ?? [''])] : undefined);
      if (index === null) next.set(r.scope, old as ScopeIndex);
      else {
        next.set(r.scope, index);
        changed = true;
      }
    }
    // Packs not rescanned keep their current index (a `read` may have updated it while this scan yielded).
    for (const scope of kept) next.set(scope, this.indexes.get(scope) as ScopeIndex);
    // A file `read` re-hashed during this scan may be overwritten by what the
    // scan saw; the next scan (or read) corrects it. Never a wrong hash header.
    if (changed) this.install(next);
    return changed;
  }

  private install(next: Map<ScopeName, ScopeIndex>): void {
    this.indexes = next;
    this.sorted = [...next.values()].map((i) => i.snapshot).sort((a, b) => compareScopes(a.scope, b.scope));
    this.generation++;
  }

  async read(scope: ScopeName, path: string): Promise<PackFile | null> {
    const target = this.locate(scope, path);
    if (target === null) return null;
    // Every directory on the way must be a real directory inside the pack, not a symlink swapped in.
    // Stryker disable next-line ArrowFunction: undefined, like null, matches no expected parent
    const realParent = await realpath(dirname(target.abs)).catch(() => null);
    if (realParent !== this.expectedParent(scope, path)) return null;
    let handle;
    try {
      handle = await open(target.abs, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      return null;
    }
    try {
      const s = await handle.stat();
      if (!s.isFile() || s.size > this.options.maxFileSize) return null;
      return this.answer(scope, path, target.entry, await handle.readFile(), s.mtimeMs);
    } finally {
      await handle.close();
    }
  }

  /** `read` for files the snapshot says are small, without a promise per step (batches). */
  readSmallSync(scope: ScopeName, path: string, parents?: Map<string, string | null>): PackFile | null | undefined {
    const target = this.locate(scope, path);
    if (target === null) return null;
    if (target.entry.size > SYNC_HASH_BYTES) return undefined;
    const parent = dirname(target.abs);
    let realParent = parents?.get(parent);
    if (realParent === undefined) {
      try {
        realParent = realpathSync.native(parent);
      } catch {
        realParent = null;
      }
      parents?.set(parent, realParent);
    }
    if (realParent !== this.expectedParent(scope, path)) return null;
    let fd: number;
    try {
      fd = openSync(target.abs, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      return null;
    }
    try {
      const s = fstatSync(fd);
      if (!s.isFile() || s.size > this.options.maxFileSize) return null;
      return this.answer(scope, path, target.entry, readFileSync(fd), s.mtimeMs);
    } catch {
      return null;
    } finally {
      closeSync(fd);
    }
  }

  private locate(scope: ScopeName, path: string): { abs: string; entry: PlanFile } | null {
    const entry = this.indexes.get(scope)?.byPath.get(path)?.file;
    const base = scopeDir(this.root, scope);
    if (entry === undefined || base === null || packPathProblem(path) !== null) return null;
    return { abs: join(base, path), entry };
  }

  /** realRoot is set: a file is located only once a scan has run, and scans set it first. */
  private expectedParent(scope: ScopeName, path: string): string {
    return join(scopeDir(this.realRoot as string, scope) as string, dirname(path));
  }

  /** Hashes the bytes read; a file that changed since the scan updates the snapshot at once. */
  private answer(scope: ScopeName, path: string, entry: PlanFile, bytes: Buffer, statMtimeMs: number): PackFile | null {
    if (bytes.length > this.options.maxFileSize) return null;
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const mtimeMs = Math.floor(statMtimeMs);
    if (sha256 !== entry.sha256 || bytes.length !== entry.size || mtimeMs !== entry.mtimeMs) {
      // The stat was taken before reading, so the bytes may be newer than it: keep no fingerprint (re-hash next scan).
      this.replaceEntry(scope, { file: { path, size: bytes.length, mtimeMs, sha256 }, fp: null });
    }
    return { bytes, sha256, size: bytes.length, mtimeMs };
  }

  /** The file changed since the scan: its snapshot takes the fresh entry at once. */
  private replaceEntry(scope: ScopeName, entry: IndexEntry): void {
    const index = this.indexes.get(scope);
    if (index === undefined) return;
    const entries = [...index.byPath.values()].map((e) => (e.file.path === entry.file.path ? entry : e));
    const next = new Map(this.indexes);
    next.set(scope, indexOf(scope, entries));
    this.install(next);
  }
}
