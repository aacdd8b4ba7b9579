// Watches the data directory so a change is rescanned within tens of
// milliseconds instead of waiting for the periodic rescan.
//
// One non-recursive fs.watch (one inotify watch) per directory the scans
// walk: DATA/, DATA/teams/ and every directory of every pack. The scanner
// tells us each directory just before listing it (ScanObserver), so a file
// created after the listing is caught by the watch and one created before it
// is in the listing; directories the scan no longer finds are unwatched. An
// event only says which directory of which pack (or directory.json, or the
// set of packs) to rescan, with everything below it: the scan, not the
// event, decides what changed.
//
// Node's own `recursive: true` watch is not used: on Linux it places a watch
// on every file as well (100 000 files = 100 000 inotify watches and a stat
// per file at start).
//
// Watching is an accelerator only. Events can be lost and the periodic full
// rescan stays; when a watch cannot be placed (inotify limits, filesystems
// without inotify) or reports an error, every watch is closed, `failed` is
// called once and the control plane falls back to frequent full rescans.

import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import { escapeForLog } from '../../core/text/escape-for-log.js';
import { ACCOUNT_SCOPE, isValidTeamId, teamScope, type ScopeName } from '../../core/scope.js';
import { scopeDir, type ScanObserver } from '../../store/data-dir/dir-pack-store.js';

/** What a change asks to rescan. */
export interface ScanWork {
  /** directory.json, which packs exist, and every pack. */
  full: boolean;
  /** directory.json. */
  directory: boolean;
  /** Which packs exist (account/, teams/<id>/). */
  layout: boolean;
  /** Per pack, the directories (relative to the pack, '' = all of it) to rescan with everything below them. */
  readonly packs: Map<ScopeName, Set<string>>;
}

export function emptyWork(): ScanWork {
  return { full: false, directory: false, layout: false, packs: new Map() };
}

export function fullWork(): ScanWork {
  return { full: true, directory: true, layout: true, packs: new Map() };
}

export function mergeWork(into: ScanWork, from: ScanWork): void {
  into.full ||= from.full;
  into.directory ||= from.directory;
  into.layout ||= from.layout;
  for (const [scope, dirs] of from.packs) for (const d of dirs) addSubtree(into, scope, d);
}

function addSubtree(work: ScanWork, scope: ScopeName, rel: string): void {
  const dirs = work.packs.get(scope);
  if (dirs === undefined) work.packs.set(scope, new Set([rel]));
  else dirs.add(rel);
}

/** fs.watch as used here (tests substitute one that fails). */
export type WatchFunction = (dir: string, listener: (event: string, filename: string | null) => void) => Pick<FSWatcher, 'close' | 'on'>;

const defaultWatch: WatchFunction = (dir, listener) =>
  fsWatch(dir, { persistent: false, encoding: 'utf8' }, (event, filename) => listener(event, filename));

/**
 * What an event in `dir` (a pack's directory when `scope` is set, else DATA/
 * or DATA/teams/) about the entry `name` asks to rescan.
 */
export function workForEvent(root: string, dir: string, scope: ScopeName | null, name: string | null): ScanWork {
  const work = emptyWork();
  if (scope !== null) {
    const base = scopeDir(root, scope);
    addSubtree(work, scope, base !== null && dir.startsWith(`${base}/`) ? dir.slice(base.length + 1) : '');
  } else if (dir === root) {
    if (name === 'directory.json') work.directory = true;
    else if (name === 'account') {
      work.layout = true;
      addSubtree(work, ACCOUNT_SCOPE, '');
    } else if (name === 'teams' || name === null || name === basename(root)) work.full = true;
    // Anything else directly in DATA/ (.knowledgefs/, editor files) is not served.
  } else {
    work.layout = true;
    if (name === null) work.full = true;
    else if (isValidTeamId(name)) addSubtree(work, teamScope(name), '');
  }
  return work;
}

interface Watched {
  readonly scope: ScopeName | null;
  readonly watcher: Pick<FSWatcher, 'close'>;
  /** The `renew()` round it was placed in. */
  readonly round: number;
}

export interface DataWatchOptions {
  readonly root: string;
  /** Called for every event with what to rescan. */
  readonly changed: (work: ScanWork) => void;
  /** Called once when watching stops working; no more events follow. */
  readonly failed: (reason: string) => void;
  readonly watch?: WatchFunction;
}

export class DataWatch implements ScanObserver {
  /** Watched directories, grouped by pack (null: DATA/ and DATA/teams/). */
  private readonly byScope = new Map<ScopeName | null, Map<string, Watched>>();
  private broken = false;
  private closed = false;
  private round = 0;
  private readonly watch: WatchFunction;

  constructor(private readonly options: DataWatchOptions) {
    this.watch = options.watch ?? defaultWatch;
  }

  /** True while every walked directory is watched. */
  get healthy(): boolean {
    return !this.broken;
  }

  /** Number of directories watched. */
  get size(): number {
    let n = 0;
    for (const group of this.byScope.values()) n += group.size;
    return n;
  }

  /**
   * The next listing of each directory places its watch again (the full
   * rescans call this): a watch left on a replaced directory by a lost
   * event does not stay deaf for good.
   */
  renew(): void {
    this.round++;
  }

  listing(dir: string, scope: ScopeName | null): void {
    if (this.broken || this.closed) return;
    let group = this.byScope.get(scope);
    const old = group?.get(dir);
    if (old !== undefined && old.round === this.round) return;
    let watcher: Pick<FSWatcher, 'close' | 'on'>;
    try {
      watcher = this.watch(dir, (_event, name) => this.event(dir, scope, name));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Gone, not a directory, not readable or past PATH_MAX: the listing that
      // follows finds nothing either (and logs why), and the parent's watch
      // sees it come back or change.
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES' || code === 'EPERM' || code === 'ENAMETOOLONG') return;
      this.fail(`cannot watch ${escapeForLog(dir)}: ${describe(err)}`);
      return;
    }
    watcher.on('error', (err: unknown) => this.fail(`watch of ${escapeForLog(dir)} failed: ${describe(err)}`));
    // Closed after the new one is placed: on the same directory both share one inotify watch, so no event falls between.
    old?.watcher.close();
    if (group === undefined) {
      group = new Map();
      this.byScope.set(scope, group);
    }
    group.set(dir, { scope, watcher, round: this.round });
  }

  packScanned(scope: ScopeName, dirs: ReadonlySet<string>, within: readonly string[]): void {
    const group = this.byScope.get(scope);
    if (group === undefined) return;
    for (const [dir, w] of group) {
      if (!dirs.has(dir) && within.some((top) => dir === top || dir.startsWith(`${top}/`))) {
        w.watcher.close();
        group.delete(dir);
      }
    }
  }

  packsPresent(scopes: ReadonlySet<ScopeName>): void {
    for (const [scope, group] of this.byScope) {
      if (scope === null || scopes.has(scope)) continue;
      for (const w of group.values()) w.watcher.close();
      this.byScope.delete(scope);
    }
  }

  /** Closes every watch; later scans place none. */
  close(): void {
    this.closed = true;
    this.unwatchAll();
  }

  private unwatchAll(): void {
    for (const group of this.byScope.values()) for (const w of group.values()) w.watcher.close();
    this.byScope.clear();
  }

  private event(dir: string, scope: ScopeName | null, name: string | null): void {
    if (this.broken || this.closed) return;
    // An event named after the directory itself may mean it was deleted or
    // moved (the watch then follows the old inode, or nothing): drop the
    // watch; the rescan this event asks for watches the path again if it exists.
    if (name === null || name === basename(dir)) {
      const group = this.byScope.get(scope);
      group?.get(dir)?.watcher.close();
      group?.delete(dir);
    }
    this.options.changed(workForEvent(this.options.root, dir, scope, name));
  }

  private fail(reason: string): void {
    if (this.broken) return;
    this.broken = true;
    this.unwatchAll();
    this.options.failed(reason);
  }
}

function describe(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC') return 'the inotify watch limit is reached (sysctl fs.inotify.max_user_watches)';
  if (code === 'EMFILE') return 'the inotify instance limit is reached (sysctl fs.inotify.max_user_instances)';
  return escapeForLog(err instanceof Error ? err.message : String(err));
}
