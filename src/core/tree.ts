// The mount's in-memory tree, built from a plan. Every metadata operation
// (getattr, readdir, lookup) is one Map lookup here: no network, no
// allocation on the hot path (stat objects are built once per plan).
//
// Layout: `/` lists scopes; `/account/...` and `/team_<id>/...` hold each
// scope's files. Directories are 0555, files 0444; sizes and mtimes come from
// the plan.
//
// Page-cache rule: the kernel keeps a file's cached pages while its size and
// mtime (milliseconds) are unchanged (fuse `auto_cache`). So a path never
// reports the same (size, mtime) for two different contents: each file node
// remembers the last few (sha256, size, reported mtime) versions of its path
// (also kept a while for removed paths, in case they come back), and a new
// version whose plan mtime would collide with an earlier one of the same size
// is bumped a millisecond at a time until it doesn't. Remembering more than
// the previous version matters: A@t → B@now → B@t (an edit, then the mtime
// set back) must not report t for B while the kernel may still hold A's pages
// under t.
//
// Immutable: a new plan builds a new tree and the daemon swaps it in whole,
// so an operation never sees half of two plans.

import type { Plan, PlanFile } from './plan.js';
import { compareScopes, type ScopeName } from './scope.js';

export const DIR_MODE = 0o040555;
export const FILE_MODE = 0o100444;

/** The shape fuse-native reads; built once per node and reused for every getattr. */
export interface NodeStat {
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly size: number;
  readonly nlink: number;
  readonly blksize: number;
  readonly blocks: number;
  readonly mtime: number;
  readonly atime: number;
  readonly ctime: number;
}

export interface FileNode {
  readonly kind: 'file';
  /** Mount path, e.g. `/team_x/runbooks/a.md`. */
  readonly path: string;
  readonly scope: ScopeName;
  /** Path inside the scope, e.g. `runbooks/a.md`. */
  readonly scopePath: string;
  readonly sha256: string;
  readonly size: number;
  /** The mtime the mount reports (the plan's, or bumped; see header). */
  readonly mtimeMs: number;
  /** The mtime the plan gave. */
  readonly planMtimeMs: number;
  /** This path's recent versions, newest (this one) first; shared between trees while unchanged. */
  readonly versions: readonly FileVersion[];
  readonly stat: NodeStat;
}

export interface DirNode {
  readonly kind: 'dir';
  readonly path: string;
  /** Scope the directory belongs to; '' for the root. */
  readonly scope: ScopeName;
  /** Sorted child names. */
  readonly names: readonly string[];
  readonly stat: NodeStat;
}

export type TreeNode = FileNode | DirNode;

export interface FileVersion {
  readonly sha256: string;
  readonly size: number;
  readonly mtimeMs: number;
}

/** Versions remembered per path. */
export const VERSION_HISTORY = 4;
/** Removed paths whose versions are remembered, across plans. */
export const REMOVED_HISTORY = 4096;

export interface TreeOptions {
  readonly uid?: number;
  readonly gid?: number;
  /** Mtime for the root and for directories with no files. */
  readonly emptyDirMtimeMs?: number;
}

const BLOCK = 512;

function makeStat(mode: number, size: number, mtimeMs: number, nlink: number, opts: TreeOptions): NodeStat {
  return {
    mode,
    uid: opts.uid ?? 0,
    gid: opts.gid ?? 0,
    size,
    nlink,
    blksize: 4096,
    blocks: Math.ceil(size / BLOCK),
    mtime: mtimeMs,
    atime: mtimeMs,
    ctime: mtimeMs,
  };
}

/**
 * The mtime to report for `file` and the path's version history, given the
 * node it replaces (if any) and the versions remembered for the path.
 */
export function reportedVersion(
  file: PlanFile,
  previous: FileNode | undefined,
  history: readonly FileVersion[],
): { mtimeMs: number; versions: readonly FileVersion[] } {
  if (previous !== undefined && previous.sha256 === file.sha256 && previous.planMtimeMs === file.mtimeMs) {
    return { mtimeMs: previous.mtimeMs, versions: previous.versions };
  }
  let mtimeMs = file.mtimeMs;
  while (history.some((v) => v.sha256 !== file.sha256 && v.size === file.size && v.mtimeMs === mtimeMs)) mtimeMs++;
  const versions = [{ sha256: file.sha256, size: file.size, mtimeMs }, ...history.filter((v) => v.sha256 !== file.sha256)];
  if (versions.length > VERSION_HISTORY) versions.length = VERSION_HISTORY;
  return { mtimeMs, versions };
}

interface DirBuild {
  names: Set<string>;
  mtimeMs: number;
  scope: ScopeName;
  subdirs: number;
}

export class Tree {
  readonly version: string;
  readonly sessionId: string;
  readonly mounted: readonly string[];
  /** Scope names in the mount's order (account first). */
  readonly scopes: readonly ScopeName[];
  readonly fileCount: number;
  readonly totalBytes: number;
  private readonly nodes: Map<string, TreeNode>;
  /** Versions of paths removed by recent plans (bounded), so a path that comes back is not confused with its past. */
  private readonly removed: Map<string, readonly FileVersion[]>;

  private constructor(fields: {
    version: string;
    sessionId: string;
    mounted: readonly string[];
    scopes: readonly ScopeName[];
    fileCount: number;
    totalBytes: number;
    nodes: Map<string, TreeNode>;
    removed: Map<string, readonly FileVersion[]>;
  }) {
    this.version = fields.version;
    this.sessionId = fields.sessionId;
    this.mounted = fields.mounted;
    this.scopes = fields.scopes;
    this.fileCount = fields.fileCount;
    this.totalBytes = fields.totalBytes;
    this.nodes = fields.nodes;
    this.removed = fields.removed;
  }

  /** An empty tree: just the root. Used before the first plan and after a session is revoked. */
  static empty(opts: TreeOptions = {}): Tree {
    return Tree.fromPlan({ sessionId: '', version: '', threshold: 0, mode: 'bound-and-mounted', mounted: [], scopes: [] }, undefined, opts);
  }

  /**
   * Builds the tree for `plan`. `previous` (the tree being replaced) decides
   * mtime bumps so the kernel never keeps stale pages of a changed file.
   */
  static fromPlan(plan: Plan, previous: Tree | undefined, opts: TreeOptions = {}): Tree {
    const emptyMtime = opts.emptyDirMtimeMs ?? 0;
    const nodes = new Map<string, TreeNode>();
    const dirs = new Map<string, DirBuild>();
    const root: DirBuild = { names: new Set(), mtimeMs: emptyMtime, scope: '', subdirs: 0 };
    dirs.set('/', root);
    const scopes = [...plan.scopes].sort((a, b) => compareScopes(a.scope, b.scope));
    let fileCount = 0;
    let totalBytes = 0;

    const ensureDir = (dirPath: string, scope: ScopeName): DirBuild => {
      let dir = dirs.get(dirPath);
      if (dir !== undefined) return dir;
      const slash = dirPath.lastIndexOf('/');
      const parentPath = slash === 0 ? '/' : dirPath.slice(0, slash);
      const parent = ensureDir(parentPath, scope);
      parent.names.add(dirPath.slice(slash + 1));
      parent.subdirs++;
      dir = { names: new Set(), mtimeMs: emptyMtime, scope, subdirs: 0 };
      dirs.set(dirPath, dir);
      return dir;
    };

    for (const snapshot of scopes) {
      const scopeDir = `/${snapshot.scope}`;
      ensureDir(scopeDir, snapshot.scope);
      for (const file of snapshot.files) {
        const path = `${scopeDir}/${file.path}`;
        if (nodes.has(path) || dirs.has(path)) continue; // a name both file and dir: first wins
        const slash = path.lastIndexOf('/');
        const dirPath = path.slice(0, slash);
        const dir = ensureDir(dirPath, snapshot.scope);
        const prevNode = previous?.nodes.get(path);
        const prev = prevNode?.kind === 'file' ? prevNode : undefined;
        const { mtimeMs, versions } = reportedVersion(file, prev, prev?.versions ?? previous?.removed.get(path) ?? []);
        nodes.set(path, {
          kind: 'file',
          path,
          scope: snapshot.scope,
          scopePath: file.path,
          sha256: file.sha256,
          size: file.size,
          mtimeMs,
          planMtimeMs: file.mtimeMs,
          versions,
          stat: makeStat(FILE_MODE, file.size, mtimeMs, 1, opts),
        });
        dir.names.add(path.slice(slash + 1));
        fileCount++;
        totalBytes += file.size;
        // A directory's mtime is its newest descendant's: `find -newer` works on dirs too.
        for (let p = dirPath; ; ) {
          const d = dirs.get(p);
          if (d === undefined || d.mtimeMs >= mtimeMs) break;
          d.mtimeMs = mtimeMs;
          if (p === '/') break;
          const s = p.lastIndexOf('/');
          p = s === 0 ? '/' : p.slice(0, s);
        }
      }
    }

    for (const [dirPath, dir] of dirs) {
      if (nodes.has(dirPath)) continue;
      const names = [...dir.names].sort();
      nodes.set(dirPath, {
        kind: 'dir',
        path: dirPath,
        scope: dir.scope,
        names,
        stat: makeStat(DIR_MODE, 4096, dir.mtimeMs, 2 + dir.subdirs, opts),
      });
    }

    return new Tree({
      version: plan.version,
      sessionId: plan.sessionId,
      mounted: [...plan.mounted],
      scopes: scopes.map((s) => s.scope),
      fileCount,
      totalBytes,
      nodes,
      removed: previous === undefined ? new Map() : Tree.rememberRemoved(previous, nodes),
    });
  }

  get(path: string): TreeNode | undefined {
    return this.nodes.get(path);
  }

  /** The file at `<scope>/<path inside scope>`, as the read tool names it. */
  fileByScopePath(scopePath: string): FileNode | undefined {
    const node = this.nodes.get(`/${scopePath}`);
    return node?.kind === 'file' ? node : undefined;
  }

  *files(): IterableIterator<FileNode> {
    for (const node of this.nodes.values()) if (node.kind === 'file') yield node;
  }

  hasScope(scope: ScopeName): boolean {
    return this.scopes.includes(scope);
  }

  /**
   * This tree minus one scope (a denied open removes it at once; the next plan
   * decides whether it comes back). The version is cleared so the next sync
   * fetches a full plan instead of a 304.
   */
  withoutScope(scope: ScopeName): Tree {
    if (!this.hasScope(scope)) return this;
    const prefix = `/${scope}`;
    const nodes = new Map<string, TreeNode>();
    let fileCount = 0;
    let totalBytes = 0;
    for (const [path, node] of this.nodes) {
      if (path === prefix || path.startsWith(`${prefix}/`)) continue;
      if (node.kind === 'file') {
        fileCount++;
        totalBytes += node.size;
      }
      nodes.set(path, node);
    }
    const root = this.nodes.get('/');
    if (root?.kind === 'dir') {
      nodes.set('/', {
        ...root,
        names: root.names.filter((n) => n !== scope),
        stat: { ...root.stat, nlink: root.stat.nlink - 1 },
      });
    }
    return new Tree({
      version: '',
      sessionId: this.sessionId,
      mounted: this.mounted,
      scopes: this.scopes.filter((s) => s !== scope),
      fileCount,
      totalBytes,
      nodes,
      removed: Tree.rememberRemoved(this, nodes),
    });
  }

  /** Versions of paths in `previous` (or remembered by it) that `nodes` lacks; newest removals kept. */
  private static rememberRemoved(previous: Tree, nodes: Map<string, TreeNode>): Map<string, readonly FileVersion[]> {
    const removed = new Map<string, readonly FileVersion[]>();
    for (const node of previous.files()) {
      if (removed.size >= REMOVED_HISTORY) break;
      if (!nodes.has(node.path)) removed.set(node.path, node.versions);
    }
    for (const [path, versions] of previous.removed) {
      if (removed.size >= REMOVED_HISTORY) break;
      if (!nodes.has(path) && !removed.has(path)) removed.set(path, versions);
    }
    return removed;
  }
}
