// The nodes of a tree, built from plan snapshots: one builder per tree built
// at once (Tree.fromPlan), and one per scope built on first use
// (pending-scope.ts), so both apply exactly the same rules (tree.ts's
// header: first name wins, the page-cache rule, inode numbers).

import type { ScopeSnapshot } from '../session/plan.js';
import { fileTable } from '../session/plan-columns.js';
import type { ScopeName } from '../scope.js';
import { type DirBuild, DirEntry, FileEntry, type FileVersion, type Owner, type TreeNode, NO_HISTORY, bumpDirMtimes, reportedVersion } from './tree-nodes.js';

/**
 * The inode numbers of one tree lineage. Every tree of the lineage shares
 * it, so a scope built after later trees were made still takes numbers no
 * other node of the lineage ever had.
 */
export interface InoCounter {
  next: number;
}

/** What the tree being replaced knows about a path. */
export interface PreviousNodes {
  get(path: string): TreeNode | undefined;
  /** Versions remembered for a path that a recent plan removed. */
  removedVersions(path: string): readonly FileVersion[] | undefined;
}

export class NodeBuilder {
  readonly nodes = new Map<string, TreeNode>();
  readonly root: DirBuild;
  /** Paths whose content differs from what `previous` held there (tree.ts, `changedPaths`). */
  readonly changedPaths: string[] = [];
  fileCount = 0;
  totalBytes = 0;
  private readonly dirs = new Map<string, DirBuild>();

  constructor(
    private readonly owner: Owner,
    private readonly emptyMtime: number,
    private readonly inos: InoCounter,
    private readonly previous: PreviousNodes | undefined,
  ) {
    this.root = { names: [], mtimeMs: emptyMtime, scope: '', subdirs: 0, parent: undefined };
    this.dirs.set('/', this.root);
  }

  /** Undefined when a file already holds that name (a plan listing both `a` and `a/b`: first wins). */
  private ensureDir(dirPath: string, scope: ScopeName): DirBuild | undefined {
    let dir = this.dirs.get(dirPath);
    if (dir !== undefined) return dir;
    if (this.nodes.has(dirPath)) return undefined;
    const slash = dirPath.lastIndexOf('/');
    const parent = this.ensureDir(slash === 0 ? '/' : dirPath.slice(0, slash), scope);
    if (parent === undefined) return undefined;
    parent.names.push(dirPath.slice(slash + 1));
    parent.subdirs++;
    dir = { names: [], mtimeMs: this.emptyMtime, scope, subdirs: 0, parent };
    this.dirs.set(dirPath, dir);
    return dir;
  }

  addScope(snapshot: ScopeSnapshot): void {
    const { owner, nodes, dirs, previous } = this;
    const scopeDir = `/${snapshot.scope}`;
    this.ensureDir(scopeDir, snapshot.scope);
    // Files come sorted, so most share the previous file's directory: no slice or lookup for those.
    let lastDirPath = '';
    let lastDir: DirBuild | undefined;
    // By index, whichever form the files came in: columns (plan-columns.ts) never become one object per file.
    const files = fileTable(snapshot);
    for (let i = 0; i < files.length; i++) {
      // join builds a flat string (a template literal keeps a cons string plus its flattened copy).
      const path = [scopeDir, files.path(i)].join('/');
      if (nodes.has(path) || dirs.has(path)) continue; // a name both file and dir: first wins
      const slash = path.lastIndexOf('/');
      if (slash !== lastDirPath.length || !path.startsWith(lastDirPath)) {
        lastDirPath = path.slice(0, slash);
        lastDir = this.ensureDir(lastDirPath, snapshot.scope);
      }
      const dir = lastDir;
      if (dir === undefined) continue;
      const sha256 = files.sha256(i);
      const size = files.size(i);
      const planMtimeMs = files.mtimeMs(i);
      const prevNode = previous?.get(path);
      const prev = prevNode?.kind === 'file' ? prevNode : undefined;
      if (prev !== undefined && prev.sha256 === sha256 && prev.planMtimeMs === planMtimeMs && prev.size === size && prev.stat.uid === owner.uid && prev.stat.gid === owner.gid && prev.stat.mode === owner.fileMode) {
        // Unchanged: the node is immutable, reuse it.
        nodes.set(path, prev);
        dir.names.push(path.slice(slash + 1));
        this.fileCount++;
        this.totalBytes += size;
        bumpDirMtimes(dir, prev.mtimeMs);
        continue;
      }
      const remembered = prev === undefined ? (previous?.removedVersions(path) ?? NO_HISTORY) : NO_HISTORY;
      const last = prev ?? remembered[0];
      if (last !== undefined && last.sha256 !== sha256) this.changedPaths.push(path);
      const { mtimeMs, history } = reportedVersion({ sha256, size, mtimeMs: planMtimeMs }, prev, remembered);
      nodes.set(path, new FileEntry(this.inos.next++, path, snapshot.scope, sha256, size, mtimeMs, planMtimeMs, history, owner));
      dir.names.push(path.slice(slash + 1));
      this.fileCount++;
      this.totalBytes += size;
      bumpDirMtimes(dir, mtimeMs);
    }
  }

  /** A scope whose nodes come later (pending-scope.ts): only its directory's name and mtime reach the root now. */
  addDeferredScope(scope: ScopeName, mtimeMs: number): void {
    this.root.names.push(scope);
    this.root.subdirs++;
    bumpDirMtimes(this.root, mtimeMs);
  }

  /**
   * One node per directory, after the last scope. `fixedIno` names the
   * directories whose number is already decided (the root, a directory the
   * previous tree had); every other directory takes the next number.
   */
  finishDirs(fixedIno: (dirPath: string) => number | undefined): void {
    for (const [dirPath, dir] of this.dirs) {
      dir.names.sort();
      const ino = fixedIno(dirPath) ?? this.inos.next++;
      this.nodes.set(dirPath, new DirEntry(ino, dirPath, dir.scope, dir.names, dir.mtimeMs, 2 + dir.subdirs, this.owner));
    }
  }
}
