// The mount's in-memory tree, built from a plan. Every metadata operation
// (getattr, readdir, lookup) is one Map lookup here, no network: inside a
// scope built on first use, one more and a slice of the path for the scope's
// name, the only allocation on the hot path. A node is its own stat object
// (constant fields are prototype getters), which keeps 100 000 files small.
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
//
// Built on first use: a scope nothing of which can have reached the kernel
// yet (a new tree's, or one the previous tree lacked) is deferred: the root
// and a stat of its directory are known at once, its file nodes are built
// by the first lookup or listing inside it (pending-scope.ts). What it then
// holds is exactly what building it at once would give, so every rule here
// holds for it; only the moment its nodes are made differs. A tree with a
// deferred scope nobody looked into carries it to the next plan unbuilt
// while its files stay the same.
//
// Inode numbers (what the kernel calls node ids on the libfuse 3 binding):
// the root is 1; a directory keeps its number while its path stays a
// directory; a file keeps its number while its content is unchanged and gets
// a new one for each new version. Numbers are never reused in one tree
// lineage (its trees share one counter, which a scope built late draws from
// too), so a descriptor held across a change stays on the version it opened
// and the kernel may keep the cached pages of every inode for as long as it
// likes.

import type { Plan } from '../session/plan.js';
import { compareScopes, type ScopeName } from '../scope.js';
import { NodeBuilder, type InoCounter } from './node-builder.js';
import { PendingScope, type PlannedFile } from './pending-scope.js';
import { type FileVersion, type FileNode, type TreeNode, ROOT_INO, REMOVED_HISTORY, type TreeOptions, ownerOf, NO_PATHS, DirEntry, versionsOf } from './tree-nodes.js';
export { DIR_MODE, FILE_MODE, ROOT_INO, VERSION_HISTORY, REMOVED_HISTORY, parentPath, reportedVersion, type NodeStat, type FileVersion, type FileNode, type DirNode, type TreeNode, type TreeOptions } from './tree-nodes.js';
export type { PlannedFile } from './pending-scope.js';

export class Tree {
  readonly version: string;
  readonly sessionId: string;
  readonly mounted: readonly string[];
  /** Scope names in the mount's order (account first). */
  readonly scopes: readonly ScopeName[];
  readonly fileCount: number;
  readonly totalBytes: number;
  /** The lineage's inode numbers (see header), shared with every tree built from this one. */
  private readonly inos: InoCounter;
  /** The plan's version of each scope: what the tree holds, for asking the control plane what changed. */
  private readonly scopeVersions: ReadonlyMap<ScopeName, string>;
  /** The root and every node of the scopes built at once. */
  private readonly nodes: Map<string, TreeNode>;
  /** Scopes whose nodes are built on first use (pending-scope.ts). */
  private readonly pending: ReadonlyMap<ScopeName, PendingScope>;
  /** Versions of paths removed by recent plans (bounded), so a path that comes back is not confused with its past. */
  private readonly removed: Map<string, readonly FileVersion[]>;
  /**
   * Paths whose content differs from what the replaced tree held there (or,
   * for a path that comes back, from its last remembered version). Added
   * paths with no past are not listed: nothing of theirs can be cached.
   */
  readonly changedPaths: readonly string[];

  private constructor(fields: {
    version: string;
    sessionId: string;
    mounted: readonly string[];
    scopes: readonly ScopeName[];
    scopeVersions: ReadonlyMap<ScopeName, string>;
    fileCount: number;
    totalBytes: number;
    inos: InoCounter;
    nodes: Map<string, TreeNode>;
    pending: ReadonlyMap<ScopeName, PendingScope>;
    removed: Map<string, readonly FileVersion[]>;
    changedPaths?: readonly string[];
  }) {
    this.version = fields.version;
    this.sessionId = fields.sessionId;
    this.mounted = fields.mounted;
    this.scopes = fields.scopes;
    this.scopeVersions = fields.scopeVersions;
    this.fileCount = fields.fileCount;
    this.totalBytes = fields.totalBytes;
    this.inos = fields.inos;
    this.nodes = fields.nodes;
    this.pending = fields.pending;
    this.removed = fields.removed;
    this.changedPaths = fields.changedPaths ?? NO_PATHS;
  }

  /**
   * An empty tree: just the root. Used before the first plan and after a
   * session is revoked (`previous` then continues its inode numbers).
   */
  static empty(opts: TreeOptions = {}, previous?: Tree): Tree {
    return Tree.fromPlan({ sessionId: '', version: '', threshold: 0, mode: 'bound-and-mounted', mounted: [], scopes: [] }, previous, opts);
  }

  /**
   * Builds the tree for `plan`. `previous` (the tree being replaced) decides
   * mtime bumps so the kernel never keeps stale pages of a changed file.
   * A scope nothing of which can have reached the kernel yet is deferred
   * (pending-scope.ts), unless `opts.deferScopes` is false.
   */
  static fromPlan(plan: Plan, previous: Tree | undefined, opts: TreeOptions = {}): Tree {
    const emptyMtime = opts.emptyDirMtimeMs ?? 0;
    const owner = ownerOf(opts);
    const inos = previous?.inos ?? { next: ROOT_INO + 1 };
    const builder = new NodeBuilder(owner, emptyMtime, inos, previous === undefined ? undefined : { get: (path) => previous.get(path), removedVersions: (path) => previous.removed.get(path) });
    const scopes = [...plan.scopes].sort((a, b) => compareScopes(a.scope, b.scope));
    const pending = new Map<ScopeName, PendingScope>();
    // A scope listed twice (no control plane sends one) is merged file by file, first wins: only a build at once does that.
    const defer = opts.deferScopes !== false && scopes.every((s, i) => i === 0 || s.scope !== scopes[i - 1]?.scope);
    const removedScopes = defer && previous !== undefined ? scopesOf(previous.removed.keys()) : undefined;
    let fileCount = 0;
    let totalBytes = 0;

    for (const snapshot of scopes) {
      let deferred: PendingScope | undefined;
      if (defer) {
        const held = previous?.pending.get(snapshot.scope);
        const unseen = previous === undefined || (held === undefined && !previous.nodes.has(`/${snapshot.scope}`) && removedScopes?.has(snapshot.scope) !== true);
        if (held?.unbuiltAndSame(snapshot, owner, emptyMtime) === true) deferred = held;
        else if (unseen) deferred = PendingScope.defer(snapshot, owner, emptyMtime, inos);
      }
      if (deferred === undefined) {
        builder.addScope(snapshot);
        continue;
      }
      pending.set(snapshot.scope, deferred);
      builder.addDeferredScope(snapshot.scope, deferred.dir.mtime);
      fileCount += deferred.fileCount;
      totalBytes += deferred.totalBytes;
    }
    builder.finishDirs((dirPath) => {
      if (dirPath === '/') return ROOT_INO;
      const before = previous?.get(dirPath);
      return before?.kind === 'dir' ? before.stat.ino : undefined;
    });

    return new Tree({
      version: plan.version,
      sessionId: plan.sessionId,
      mounted: [...plan.mounted],
      scopes: scopes.map((s) => s.scope),
      scopeVersions: new Map(scopes.map((s) => [s.scope, s.version])),
      fileCount: fileCount + builder.fileCount,
      totalBytes: totalBytes + builder.totalBytes,
      inos,
      nodes: builder.nodes,
      pending,
      removed: previous === undefined ? new Map() : Tree.rememberRemoved(previous, builder.nodes, pending),
      changedPaths: builder.changedPaths,
    });
  }

  /** The node at `path`; a path inside a deferred scope builds that scope first. */
  get(path: string): TreeNode | undefined {
    const node = this.nodes.get(path);
    if (node !== undefined || this.pending.size === 0) return node;
    const end = path.indexOf('/', 1);
    const scope = this.pending.get(end === -1 ? path.slice(1) : path.slice(1, end));
    if (scope === undefined) return undefined;
    return end === -1 ? scope.dir : scope.nodes().get(path);
  }

  /** Every node, directories and files, in no particular order (deferred scopes are built). */
  all(): IterableIterator<TreeNode> {
    return this.walk(true);
  }

  /**
   * Every node the kernel may have been given: all of them but the files
   * and subdirectories of deferred scopes not built yet, which stay unbuilt.
   */
  builtNodes(): IterableIterator<TreeNode> {
    return this.walk(false);
  }

  private *walk(build: boolean): IterableIterator<TreeNode> {
    yield* this.nodes.values();
    for (const scope of this.pending.values()) {
      yield scope.dir;
      if (!build && !scope.isBuilt) continue;
      yield* scope.nodes().values();
    }
  }

  /** A directory's sorted names, or undefined when `path` is not a directory. */
  readdirNames(path: string): readonly string[] | undefined {
    const node = this.get(path);
    return node?.kind === 'dir' ? node.names : undefined;
  }

  /** The file at `<scope>/<path inside scope>`, as the read tool names it. */
  fileByScopePath(scopePath: string): FileNode | undefined {
    const node = this.get(`/${scopePath}`);
    return node?.kind === 'file' ? node : undefined;
  }

  /** Every file node (deferred scopes are built). */
  *files(): IterableIterator<FileNode> {
    for (const node of this.all()) if (node.kind === 'file') yield node;
  }

  /** Every file as the plan lists it, deferred scopes left unbuilt (prefetch, plan changes). */
  *plannedFiles(): IterableIterator<PlannedFile> {
    for (const node of this.nodes.values()) if (node.kind === 'file') yield node;
    for (const scope of this.pending.values()) yield* scope.plannedFiles();
  }

  /** Deferred scopes whose nodes are not built yet. */
  unbuiltScopes(): ScopeName[] {
    return [...this.pending.values()].filter((s) => !s.isBuilt).map((s) => s.scope);
  }

  hasScope(scope: ScopeName): boolean {
    return this.scopes.includes(scope);
  }

  /** The plan's version of `scope`, or undefined when the tree does not hold it. */
  scopeVersion(scope: ScopeName): string | undefined {
    return this.scopeVersions.get(scope);
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
    const pending = new Map([...this.pending].filter(([s]) => s !== scope));
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
    for (const kept of pending.values()) {
      fileCount += kept.fileCount;
      totalBytes += kept.totalBytes;
    }
    const root = this.nodes.get('/');
    if (root instanceof DirEntry) {
      nodes.set('/', new DirEntry(ROOT_INO, '/', '', root.names.filter((n) => n !== scope), root.stat.mtime, root.stat.nlink - 1, root.owner));
    }
    return new Tree({
      version: '',
      sessionId: this.sessionId,
      mounted: this.mounted,
      scopes: this.scopes.filter((s) => s !== scope),
      scopeVersions: new Map([...this.scopeVersions].filter(([s]) => s !== scope)),
      fileCount,
      totalBytes,
      inos: this.inos,
      nodes,
      pending,
      removed: Tree.rememberRemoved(this, nodes, pending),
    });
  }

  /**
   * Versions of the files of `previous` (or remembered by it) that the new
   * tree lacks; newest removals kept. A deferred scope the new tree still
   * holds, or one never built, gave the kernel no file to remember.
   */
  private static rememberRemoved(previous: Tree, nodes: Map<string, TreeNode>, pending: ReadonlyMap<ScopeName, PendingScope>): Map<string, readonly FileVersion[]> {
    const removed = new Map<string, readonly FileVersion[]>();
    if (previous.fileCount + previous.removed.size === 0) return removed;
    const remember = (node: TreeNode) => {
      if (node.kind === 'file' && !nodes.has(node.path)) removed.set(node.path, versionsOf(node));
    };
    for (const node of previous.nodes.values()) {
      if (removed.size >= REMOVED_HISTORY) break;
      remember(node);
    }
    for (const scope of previous.pending.values()) {
      if (pending.get(scope.scope) === scope || !scope.isBuilt) continue;
      for (const node of scope.nodes().values()) {
        if (removed.size >= REMOVED_HISTORY) break;
        remember(node);
      }
    }
    for (const [path, versions] of previous.removed) {
      if (removed.size >= REMOVED_HISTORY) break;
      if (!nodes.has(path) && !removed.has(path)) removed.set(path, versions);
    }
    return removed;
  }
}

/** The scopes that paths such as `/team_x/a.md` belong to. */
function scopesOf(paths: Iterable<string>): Set<ScopeName> {
  const scopes = new Set<ScopeName>();
  for (const path of paths) {
    const end = path.indexOf('/', 1);
    scopes.add(end === -1 ? path.slice(1) : path.slice(1, end));
  }
  return scopes;
}
