// The mount's in-memory tree, built from a plan. Every metadata operation
// (getattr, readdir, lookup) is one Map lookup here: no network, no
// allocation on the hot path. A node is its own stat object (constant
// fields are prototype getters), which keeps 100 000 files small.
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
// Inode numbers (what the kernel calls node ids on the libfuse 3 binding):
// the root is 1; a directory keeps its number while its path stays a
// directory; a file keeps its number while its content is unchanged and gets
// a new one for each new version. Numbers are never reused in one tree
// lineage (each tree continues its predecessor's counter), so a descriptor
// held across a change stays on the version it opened and the kernel may keep
// the cached pages of every inode for as long as it likes.

import type { Plan } from '../session/plan.js';
import { compareScopes, type ScopeName } from '../scope.js';
import {
  type FileVersion,
  type FileNode,
  type TreeNode,
  ROOT_INO,
  REMOVED_HISTORY,
  type TreeOptions,
  ownerOf,
  NO_HISTORY,
  NO_PATHS,
  FileEntry,
  DirEntry,
  reportedVersion,
  versionsOf,
  type DirBuild,
  bumpDirMtimes,
} from './tree-nodes.js';
export { DIR_MODE, FILE_MODE, ROOT_INO, VERSION_HISTORY, REMOVED_HISTORY, parentPath, reportedVersion, type NodeStat, type FileVersion, type FileNode, type DirNode, type TreeNode, type TreeOptions } from './tree-nodes.js';

export class Tree {
  readonly version: string;
  readonly sessionId: string;
  readonly mounted: readonly string[];
  /** Scope names in the mount's order (account first). */
  readonly scopes: readonly ScopeName[];
  readonly fileCount: number;
  readonly totalBytes: number;
  /** The next inode number this lineage hands out (see header). */
  readonly nextIno: number;
  /** The plan's version of each scope: what the tree holds, for asking the control plane what changed. */
  private readonly scopeVersions: ReadonlyMap<ScopeName, string>;
  private readonly nodes: Map<string, TreeNode>;
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
    nextIno: number;
    nodes: Map<string, TreeNode>;
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
    this.nextIno = fields.nextIno;
    this.nodes = fields.nodes;
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
   */
  static fromPlan(plan: Plan, previous: Tree | undefined, opts: TreeOptions = {}): Tree {
    const emptyMtime = opts.emptyDirMtimeMs ?? 0;
    const nodes = new Map<string, TreeNode>();
    const dirs = new Map<string, DirBuild>();
    const owner = ownerOf(opts);
    const root: DirBuild = { names: [], mtimeMs: emptyMtime, scope: '', subdirs: 0, parent: undefined };
    dirs.set('/', root);
    const scopes = [...plan.scopes].sort((a, b) => compareScopes(a.scope, b.scope));
    let fileCount = 0;
    let totalBytes = 0;
    const changedPaths: string[] = [];
    let nextIno = previous?.nextIno ?? ROOT_INO + 1;

    // Undefined when a file already holds that name (a plan listing both `a` and `a/b`: first wins).
    const ensureDir = (dirPath: string, scope: ScopeName): DirBuild | undefined => {
      let dir = dirs.get(dirPath);
      if (dir !== undefined) return dir;
      if (nodes.has(dirPath)) return undefined;
      const slash = dirPath.lastIndexOf('/');
      const parent = ensureDir(slash === 0 ? '/' : dirPath.slice(0, slash), scope);
      if (parent === undefined) return undefined;
      parent.names.push(dirPath.slice(slash + 1));
      parent.subdirs++;
      dir = { names: [], mtimeMs: emptyMtime, scope, subdirs: 0, parent };
      dirs.set(dirPath, dir);
      return dir;
    };

    for (const snapshot of scopes) {
      const scopeDir = `/${snapshot.scope}`;
      ensureDir(scopeDir, snapshot.scope);
      // Files come sorted, so most share the previous file's directory: no slice or lookup for those.
      let lastDirPath = '';
      let lastDir: DirBuild | undefined;
      for (const file of snapshot.files) {
        // join builds a flat string (a template literal keeps a cons string plus its flattened copy).
        const path = [scopeDir, file.path].join('/');
        if (nodes.has(path) || dirs.has(path)) continue; // a name both file and dir: first wins
        const slash = path.lastIndexOf('/');
        if (slash !== lastDirPath.length || !path.startsWith(lastDirPath)) {
          lastDirPath = path.slice(0, slash);
          lastDir = ensureDir(lastDirPath, snapshot.scope);
        }
        const dir = lastDir;
        if (dir === undefined) continue;
        const prevNode = previous?.nodes.get(path);
        const prev = prevNode?.kind === 'file' ? prevNode : undefined;
        if (prev !== undefined && prev.sha256 === file.sha256 && prev.planMtimeMs === file.mtimeMs && prev.size === file.size && prev.stat.uid === owner.uid && prev.stat.gid === owner.gid && prev.stat.mode === owner.fileMode) {
          // Unchanged: the node is immutable, reuse it.
          nodes.set(path, prev);
          dir.names.push(path.slice(slash + 1));
          fileCount++;
          totalBytes += file.size;
          bumpDirMtimes(dir, prev.mtimeMs);
          continue;
        }
        const remembered = prev === undefined ? (previous?.removed.get(path) ?? NO_HISTORY) : NO_HISTORY;
        const last = prev ?? remembered[0];
        if (last !== undefined && last.sha256 !== file.sha256) changedPaths.push(path);
        const { mtimeMs, history } = reportedVersion(file, prev, remembered);
        nodes.set(path, new FileEntry(nextIno++, path, snapshot.scope, file.sha256, file.size, mtimeMs, file.mtimeMs, history, owner));
        dir.names.push(path.slice(slash + 1));
        fileCount++;
        totalBytes += file.size;
        bumpDirMtimes(dir, mtimeMs);
      }
    }

    for (const [dirPath, dir] of dirs) {
      dir.names.sort();
      const before = previous?.nodes.get(dirPath);
      const ino = dirPath === '/' ? ROOT_INO : before?.kind === 'dir' ? before.stat.ino : nextIno++;
      nodes.set(dirPath, new DirEntry(ino, dirPath, dir.scope, dir.names, dir.mtimeMs, 2 + dir.subdirs, owner));
    }

    return new Tree({
      version: plan.version,
      sessionId: plan.sessionId,
      mounted: [...plan.mounted],
      scopes: scopes.map((s) => s.scope),
      scopeVersions: new Map(scopes.map((s) => [s.scope, s.version])),
      fileCount,
      totalBytes,
      nextIno,
      nodes,
      removed: previous === undefined ? new Map() : Tree.rememberRemoved(previous, nodes),
      changedPaths,
    });
  }

  get(path: string): TreeNode | undefined {
    return this.nodes.get(path);
  }

  /** Every node, directories and files, in no particular order. */
  all(): IterableIterator<TreeNode> {
    return this.nodes.values();
  }

  /** A directory's sorted names, or undefined when `path` is not a directory. */
  readdirNames(path: string): readonly string[] | undefined {
    const node = this.nodes.get(path);
    return node?.kind === 'dir' ? node.names : undefined;
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
      nextIno: this.nextIno,
      nodes,
      removed: Tree.rememberRemoved(this, nodes),
    });
  }

  /** Versions of paths in `previous` (or remembered by it) that `nodes` lacks; newest removals kept. */
  private static rememberRemoved(previous: Tree, nodes: Map<string, TreeNode>): Map<string, readonly FileVersion[]> {
    const removed = new Map<string, readonly FileVersion[]>();
    if (previous.fileCount + previous.removed.size === 0) return removed;
    for (const [path, node] of previous.nodes) {
      if (removed.size >= REMOVED_HISTORY) break;
      if (node.kind === 'file' && !nodes.has(path)) removed.set(path, versionsOf(node));
    }
    for (const [path, versions] of previous.removed) {
      if (removed.size >= REMOVED_HISTORY) break;
      if (!nodes.has(path) && !removed.has(path)) removed.set(path, versions);
    }
    return removed;
  }
}
