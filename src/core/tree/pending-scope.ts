// A scope of the plan whose nodes are built the first time something needs
// them: a lookup or a listing inside it, or a walk over every node. Until
// then the tree holds the scope's snapshot, and what the root and a stat of
// the scope's directory need (files, bytes, newest mtime, subdirectories),
// read off the sorted file list in one pass without an object per file
// (core/session/file-table.ts; the packed plan's check makes that pass on
// its way). So the mount is ready before any file node exists, and a team
// the agent never opens never costs its nodes (100 000 files: ~200 ms and
// most of the tree's memory).
//
// Tree.fromPlan defers a scope only when nothing of it can have reached the
// kernel: the tree being replaced had no such scope and remembers no
// removed path in it. The nodes built later are exactly those a tree built
// at once would hold, because the same NodeBuilder builds both; only their
// inode numbers differ, taken from the lineage's counter when built.

import type { ScopeSnapshot } from '../session/plan.js';
import { surveyFiles, type ScopeSurvey } from '../session/file-table.js';
import { fileTable } from '../session/plan-columns.js';
import type { ScopeName } from '../scope.js';
import { NodeBuilder, type InoCounter } from './node-builder.js';
import { DirEntry, NO_PATHS, type DirNode, type Owner, type TreeNode } from './tree-nodes.js';

/** A file as the plan lists it, with the scope it belongs to: a file node is one, and so is a file not built yet. */
export interface PlannedFile {
  readonly scope: ScopeName;
  /** Path inside the scope. */
  readonly scopePath: string;
  readonly sha256: string;
  readonly size: number;
  /** The mtime the plan gave. */
  readonly planMtimeMs: number;
}

/**
 * Two snapshots of one version list the same files in the same order. The
 * version hashes every path and sha256 in sorted order, so what it cannot
 * tell apart is a size or an mtime, or rows of the same files out of order.
 */
function sameFiles(x: ScopeSnapshot, y: ScopeSnapshot): boolean {
  // Stryker disable next-line ConditionalExpression: a shortcut; the same snapshot also passes the loop
  if (x === y) return true;
  const a = fileTable(x);
  const b = fileTable(y);
  // Stryker disable next-line ConditionalExpression: one version is one count of files; this keeps the loop in bounds
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    // Stryker disable next-line ConditionalExpression,LogicalOperator: with the paths in the same order, the version has compared the sha256s
    if (a.path(i) !== b.path(i) || a.sha256(i) !== b.sha256(i)) return false;
    if (a.size(i) !== b.size(i) || a.mtimeMs(i) !== b.mtimeMs(i)) return false;
  }
  return true;
}

/** The scope's directory: its stat is known at once, its listing builds the scope. */
class PendingScopeDir extends DirEntry {
  constructor(
    private readonly pending: PendingScope,
    ino: number,
    path: string,
    scope: ScopeName,
    mtime: number,
    nlink: number,
    owner: Owner,
  ) {
    super(ino, path, scope, NO_PATHS, mtime, nlink, owner);
  }
  override get names(): readonly string[] {
    return this.pending.listing();
  }
}

export class PendingScope {
  readonly scope: ScopeName;
  readonly fileCount: number;
  readonly totalBytes: number;
  /** The scope's directory node, the same object before and after the build. */
  readonly dir: DirEntry;
  /** Dropped once built: the nodes then hold everything. */
  private snapshot: ScopeSnapshot | undefined;
  private dropped: ReadonlySet<number> | undefined;
  private built: ReadonlyMap<string, TreeNode> | undefined;
  private names: readonly string[] = NO_PATHS;

  private constructor(
    snapshot: ScopeSnapshot,
    survey: ScopeSurvey,
    private readonly owner: Owner,
    private readonly emptyMtime: number,
    private readonly inos: InoCounter,
  ) {
    this.scope = snapshot.scope;
    this.snapshot = snapshot;
    this.fileCount = survey.fileCount;
    this.totalBytes = survey.totalBytes;
    this.dropped = survey.dropped;
    const mtime = Math.max(emptyMtime, survey.newestMtimeMs);
    this.dir = new PendingScopeDir(this, inos.next++, `/${snapshot.scope}`, snapshot.scope, mtime, 2 + survey.subdirs, owner);
  }

  /** Undefined when the scope must be built at once (surveyFiles). */
  static defer(snapshot: ScopeSnapshot, owner: Owner, emptyMtime: number, inos: InoCounter): PendingScope | undefined {
    const files = fileTable(snapshot);
    const survey = files.survey ?? surveyFiles(files);
    return survey === undefined ? undefined : new PendingScope(snapshot, survey, owner, emptyMtime, inos);
  }

  get isBuilt(): boolean {
    return this.built !== undefined;
  }

  /**
   * Whether the next tree may hold this very object for `snapshot`: still
   * unbuilt (nothing of it reached the kernel), the same files with the
   * same sizes and mtimes, shown with the same owner and modes.
   */
  unbuiltAndSame(snapshot: ScopeSnapshot, owner: Owner, emptyMtime: number): boolean {
    if (this.snapshot === undefined || emptyMtime !== this.emptyMtime) return false;
    const o = this.owner;
    if (owner.uid !== o.uid || owner.gid !== o.gid || owner.fileMode !== o.fileMode || owner.dirMode !== o.dirMode) return false;
    return snapshot.version === this.snapshot.version && sameFiles(snapshot, this.snapshot);
  }

  /** The nodes below the scope's directory by mount path (`dir` stands for the directory itself); built on the first call. */
  nodes(): ReadonlyMap<string, TreeNode> {
    if (this.built === undefined) this.built = this.build(this.snapshot as ScopeSnapshot);
    return this.built;
  }

  /** The scope directory's sorted names (builds the scope). */
  listing(): readonly string[] {
    this.nodes();
    return this.names;
  }

  private build(snapshot: ScopeSnapshot): ReadonlyMap<string, TreeNode> {
    const builder = new NodeBuilder(this.owner, this.emptyMtime, this.inos, undefined);
    builder.addScope(snapshot);
    // The tree's own root and `dir` stand for these two (so they take no number from the counter): keep the listing, not a second node.
    builder.finishDirs((dirPath) => (dirPath === '/' || dirPath === this.dir.path ? this.dir.ino : undefined));
    builder.nodes.delete('/');
    this.names = (builder.nodes.get(this.dir.path) as DirNode).names;
    builder.nodes.delete(this.dir.path);
    this.snapshot = undefined;
    this.dropped = undefined;
    return builder.nodes;
  }

  /** Every file the scope keeps, without building it. */
  *plannedFiles(): IterableIterator<PlannedFile> {
    if (this.built !== undefined) {
      for (const node of this.built.values()) if (node.kind === 'file') yield node;
      return;
    }
    const { scope, dropped } = this;
    const files = fileTable(this.snapshot as ScopeSnapshot);
    for (let i = 0; i < files.length; i++) {
      if (dropped?.has(i) === true) continue;
      yield { scope, scopePath: files.path(i), sha256: files.sha256(i), size: files.size(i), planMtimeMs: files.mtimeMs(i) };
    }
  }
}
