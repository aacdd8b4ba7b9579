// The embedded pack store: DATA/account/ and DATA/teams/<id>/ on local disk.
//
// A team pack is any directory DATA/teams/<id>/ whose name is a valid team id
// (listed in directory.json or not: the directory is the pack). Scans walk
// every pack, skip what can't be served (symlinks, non-regular files, bad or
// non-UTF-8 names, over-long paths, files above maxFileSize) with ONE log line
// per path for the life of the process, and hash only files whose
// (ino, size, mtimeMs, ctimeMs) changed since the last scan, so rescanning an
// unchanged tree costs one lstat per file. Work runs in bounded async batches
// so the event loop keeps serving during a scan.
//
// `read` opens the file without following symlinks, checks its directory is
// still inside the pack, hashes the bytes it read and, if they no longer match
// the snapshot, updates the snapshot and answers with the fresh hash: bytes
// and hash always belong together.

import { createHash } from 'node:crypto';
import { constants, type Dirent } from 'node:fs';
import { lstat, open, readdir, readFile, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { packPathProblem, segmentProblem } from '../core/paths.js';
import { snapshotScope, type PlanFile, type ScopeSnapshot } from '../core/plan.js';
import { ACCOUNT_SCOPE, compareScopes, isValidTeamId, parseScope, teamScope, type ScopeName } from '../core/scope.js';
import { mapLimit, type PackFile, type PackStore } from './pack-store.js';

export interface DirPackStoreOptions {
  readonly maxFileSize: number;
  readonly log: (line: string) => void;
  /** Files lstat'ed at once during a scan. */
  readonly statConcurrency?: number;
  /** Files hashed at once during a scan. */
  readonly hashConcurrency?: number;
}

interface ScopeIndex {
  readonly snapshot: ScopeSnapshot;
  readonly byPath: ReadonlyMap<string, PlanFile>;
}

interface Candidate {
  readonly scope: ScopeName;
  readonly rel: string;
  readonly abs: string;
}

const MAX_LOGGED = 100_000;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function indexOf(snapshot: ScopeSnapshot): ScopeIndex {
  return { snapshot, byPath: new Map(snapshot.files.map((f) => [f.path, f])) };
}

export function scopeDir(root: string, scope: ScopeName): string | null {
  const parsed = parseScope(scope);
  if (parsed === null) return null;
  return parsed.kind === 'account' ? join(root, 'account') : join(root, 'teams', parsed.teamId);
}

export class DirPackStore implements PackStore {
  private indexes = new Map<ScopeName, ScopeIndex>();
  private sorted: ScopeSnapshot[] = [];
  private hashCache = new Map<string, { fp: string; sha256: string }>();
  private readonly logged = new Set<string>();
  private realRoot: string | null = null;
  private scanning: Promise<boolean> | null = null;
  generation = 0;

  constructor(
    readonly root: string,
    private readonly options: DirPackStoreOptions,
  ) {}

  scopes(): readonly ScopeSnapshot[] {
    return this.sorted;
  }

  snapshot(scope: ScopeName): ScopeSnapshot | undefined {
    return this.indexes.get(scope)?.snapshot;
  }

  /** Scans once (concurrent callers share one scan); true when any snapshot changed. */
  scan(): Promise<boolean> {
    this.scanning ??= this.doScan().finally(() => {
      this.scanning = null;
    });
    return this.scanning;
  }

  private logOnce(key: string, line: string): void {
    if (this.logged.has(key)) return;
    if (this.logged.size >= MAX_LOGGED) this.logged.clear();
    this.logged.add(key);
    this.options.log(line);
  }

  private skip(abs: string, why: string): void {
    this.logOnce(`${abs}\0${why}`, `skipping ${abs}: ${why}`);
  }

  private async listDir(dir: string): Promise<Dirent<Buffer>[] | null> {
    try {
      return await readdir(dir, { withFileTypes: true, encoding: 'buffer' });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') this.skip(dir, `cannot list directory (${code ?? String(err)})`);
      return null;
    }
  }

  private async packRoots(): Promise<{ scope: ScopeName; dir: string }[]> {
    this.realRoot ??= await realpath(this.root);
    const roots: { scope: ScopeName; dir: string }[] = [];
    const account = join(this.root, 'account');
    const accountStat = await lstat(account).catch(() => null);
    if (accountStat?.isDirectory()) roots.push({ scope: ACCOUNT_SCOPE, dir: account });
    else if (accountStat) this.skip(account, 'not a directory (symlinks are not followed)');
    const teamsDir = join(this.root, 'teams');
    for (const entry of (await this.listDir(teamsDir)) ?? []) {
      const abs = join(teamsDir, entry.name.toString('latin1'));
      let name: string;
      try {
        name = utf8.decode(entry.name);
      } catch {
        this.skip(abs, 'name is not valid UTF-8');
        continue;
      }
      const dir = join(teamsDir, name);
      if (!isValidTeamId(name)) {
        if (entry.isDirectory()) this.skip(dir, 'not a valid team id (expected [a-z0-9][a-z0-9_-]{0,62})');
        else this.skip(dir, 'not a team directory');
        continue;
      }
      if (!entry.isDirectory()) {
        this.skip(dir, entry.isSymbolicLink() ? 'symlink (not followed)' : 'not a directory');
        continue;
      }
      roots.push({ scope: teamScope(name), dir });
    }
    return roots;
  }

  private async walk(scope: ScopeName, dir: string, out: Candidate[]): Promise<void> {
    const queue: { abs: string; rel: string }[] = [{ abs: dir, rel: '' }];
    while (queue.length > 0) {
      const batch = queue.splice(0, 16);
      const listings = await Promise.all(batch.map((d) => this.listDir(d.abs)));
      batch.forEach((d, i) => {
        for (const entry of listings[i] ?? []) {
          let name: string;
          try {
            name = utf8.decode(entry.name);
          } catch {
            this.skip(join(d.abs, entry.name.toString('latin1')), 'name is not valid UTF-8');
            continue;
          }
          const abs = join(d.abs, name);
          const rel = d.rel === '' ? name : `${d.rel}/${name}`;
          const problem = segmentProblem(name) ?? packPathProblem(rel);
          if (problem !== null) {
            this.skip(JSON.stringify(abs).slice(1, -1), problem);
            continue;
          }
          if (entry.isSymbolicLink()) this.skip(abs, 'symlink (not followed)');
          else if (entry.isDirectory()) queue.push({ abs, rel });
          else if (entry.isFile()) out.push({ scope, rel, abs });
          else this.skip(abs, 'not a regular file');
        }
      });
    }
  }

  private async hashFile(abs: string): Promise<string | null> {
    try {
      return createHash('sha256').update(await readFile(abs, { flag: constants.O_RDONLY | constants.O_NOFOLLOW })).digest('hex');
    } catch {
      return null; // vanished or replaced between listing and hashing: the next scan sees it
    }
  }

  private async doScan(): Promise<boolean> {
    const roots = await this.packRoots();
    const candidates: Candidate[] = [];
    for (const r of roots) await this.walk(r.scope, r.dir, candidates);

    const statConcurrency = this.options.statConcurrency ?? 64;
    const hashConcurrency = this.options.hashConcurrency ?? 4;
    const nextCache = new Map<string, { fp: string; sha256: string }>();
    const toHash: { c: Candidate; fp: string; file: Omit<PlanFile, 'sha256'> }[] = [];
    const files = new Map<ScopeName, PlanFile[]>(roots.map((r) => [r.scope, []]));

    await mapLimit(candidates, statConcurrency, async (c) => {
      const s = await lstat(c.abs).catch(() => null);
      if (s === null) return;
      if (!s.isFile()) {
        this.skip(c.abs, s.isSymbolicLink() ? 'symlink (not followed)' : 'not a regular file');
        return;
      }
      if (s.size > this.options.maxFileSize) {
        this.skip(c.abs, `larger than --max-file-size (${s.size} > ${this.options.maxFileSize} bytes)`);
        return;
      }
      const fp = `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
      const file = { path: c.rel, size: s.size, mtimeMs: Math.floor(s.mtimeMs) };
      const cached = this.hashCache.get(c.abs);
      if (cached !== undefined && cached.fp === fp) {
        nextCache.set(c.abs, cached);
        files.get(c.scope)?.push({ ...file, sha256: cached.sha256 });
      } else {
        toHash.push({ c, fp, file });
      }
    });
    await mapLimit(toHash, hashConcurrency, async ({ c, fp, file }) => {
      const sha256 = await this.hashFile(c.abs);
      if (sha256 === null) return;
      nextCache.set(c.abs, { fp, sha256 });
      files.get(c.scope)?.push({ ...file, sha256 });
    });
    this.hashCache = nextCache;

    let changed = files.size !== this.indexes.size;
    const next = new Map<ScopeName, ScopeIndex>();
    for (const [scope, list] of files) {
      const snapshot = snapshotScope(scope, list);
      const old = this.indexes.get(scope);
      if (old !== undefined && old.snapshot.version === snapshot.version && sameMeta(old.snapshot, snapshot)) {
        next.set(scope, old);
      } else {
        next.set(scope, indexOf(snapshot));
        changed = true;
      }
    }
    if (changed) this.install(next);
    return changed;
  }

  private install(next: Map<ScopeName, ScopeIndex>): void {
    this.indexes = next;
    this.sorted = [...next.values()].map((i) => i.snapshot).sort((a, b) => compareScopes(a.scope, b.scope));
    this.generation++;
  }

  async read(scope: ScopeName, path: string): Promise<PackFile | null> {
    const index = this.indexes.get(scope);
    const entry = index?.byPath.get(path);
    const base = scopeDir(this.root, scope);
    if (index === undefined || entry === undefined || base === null || packPathProblem(path) !== null) return null;
    const abs = join(base, path);
    this.realRoot ??= await realpath(this.root);
    // Every directory on the way must be a real directory inside the pack, not a symlink swapped in.
    const realParent = await realpath(dirname(abs)).catch(() => null);
    const expectedParent = join(scopeDir(this.realRoot, scope) as string, dirname(path));
    if (realParent !== expectedParent) return null;
    let handle;
    try {
      handle = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      return null;
    }
    try {
      const s = await handle.stat();
      if (!s.isFile() || s.size > this.options.maxFileSize) return null;
      const bytes = await handle.readFile();
      if (bytes.length > this.options.maxFileSize) return null;
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const mtimeMs = Math.floor(s.mtimeMs);
      if (sha256 !== entry.sha256 || bytes.length !== entry.size || mtimeMs !== entry.mtimeMs) {
        this.replaceEntry(scope, { path, size: bytes.length, mtimeMs, sha256 });
        this.hashCache.set(abs, { fp: `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`, sha256 });
      }
      return { bytes, sha256, size: bytes.length, mtimeMs };
    } finally {
      await handle.close();
    }
  }

  /** The file changed since the scan: its snapshot takes the fresh entry at once. */
  private replaceEntry(scope: ScopeName, file: PlanFile): void {
    const index = this.indexes.get(scope);
    if (index === undefined) return;
    const files = index.snapshot.files.map((f) => (f.path === file.path ? file : f));
    const next = new Map(this.indexes);
    next.set(scope, indexOf(snapshotScope(scope, files)));
    this.install(next);
  }
}

/** Versions cover (path, sha256); sizes and mtimes must match too for the plan to be unchanged. */
function sameMeta(a: ScopeSnapshot, b: ScopeSnapshot): boolean {
  if (a.files.length !== b.files.length || a.totalBytes !== b.totalBytes) return false;
  for (let i = 0; i < a.files.length; i++) {
    const x = a.files[i] as PlanFile;
    const y = b.files[i] as PlanFile;
    if (x.mtimeMs !== y.mtimeMs || x.size !== y.size) return false;
  }
  return true;
}
