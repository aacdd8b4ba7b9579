// The nodes of the mount's in-memory tree (tree.ts builds and holds them):
// a file or directory node is its own stat object, with the constant fields
// as prototype getters, and each file node carries the versions its path
// reported before (the page-cache rule in tree.ts's header).

import type { PlanFile } from '../session/plan.js';
import type { ScopeName } from '../scope.js';

export const DIR_MODE = 0o040555;
export const FILE_MODE = 0o100444;
export const S_IFDIR = 0o040000;
export const S_IFREG = 0o100000;

/** The shape fuse-native reads; a node is its own stat, reused for every getattr. */
export interface NodeStat {
  readonly ino: number;
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

export interface FileVersion {
  readonly sha256: string;
  readonly size: number;
  /** The mtime reported for this content. */
  readonly mtimeMs: number;
}

export interface FileNode extends FileVersion {
  readonly kind: 'file';
  /** Mount path, e.g. `/team_x/runbooks/a.md`. */
  readonly path: string;
  readonly scope: ScopeName;
  /** Path inside the scope, e.g. `runbooks/a.md`. */
  readonly scopePath: string;
  /** The mtime the plan gave (mtimeMs may be bumped; see header). */
  readonly planMtimeMs: number;
  /** Earlier contents of this path, newest first (at most VERSION_HISTORY - 1). */
  readonly history: readonly FileVersion[];
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

/** Versions remembered per path (this one included). */
export const VERSION_HISTORY = 4;
/** The root directory's inode (FUSE_ROOT_ID). */
export const ROOT_INO = 1;
/** Removed paths whose versions are remembered, across plans. */
export const REMOVED_HISTORY = 4096;

export interface TreeOptions {
  readonly uid?: number;
  readonly gid?: number;
  /** Permission bits of files (default 0o444) and directories (default 0o555). */
  readonly fileMode?: number;
  readonly dirMode?: number;
  /** Mtime for the root and for directories with no files. */
  readonly emptyDirMtimeMs?: number;
  /** False builds every scope at once instead of deferring one until it is first used (pending-scope.ts); default true. */
  readonly deferScopes?: boolean;
}

/** Who owns every node of a tree, and the modes they report: one object shared by all nodes. */
export interface Owner {
  readonly uid: number;
  readonly gid: number;
  readonly fileMode: number;
  readonly dirMode: number;
}

export function ownerOf(opts: TreeOptions): Owner {
  return {
    uid: opts.uid ?? 0,
    gid: opts.gid ?? 0,
    fileMode: S_IFREG | ((opts.fileMode ?? FILE_MODE) & 0o777),
    dirMode: S_IFDIR | ((opts.dirMode ?? DIR_MODE) & 0o777),
  };
}

/** The directory holding `path` ('/' for a top-level name and for the root itself). */
export function parentPath(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash <= 0 ? '/' : path.slice(0, slash);
}

export const NO_HISTORY: readonly FileVersion[] = Object.freeze([]);
export const NO_PATHS: readonly string[] = Object.freeze([]);

export class FileEntry implements FileNode, NodeStat {
  constructor(
    readonly ino: number,
    readonly path: string,
    readonly scope: ScopeName,
    readonly sha256: string,
    readonly size: number,
    readonly mtimeMs: number,
    readonly planMtimeMs: number,
    readonly history: readonly FileVersion[],
    readonly owner: Owner,
  ) {}
  get uid(): number {
    return this.owner.uid;
  }
  get gid(): number {
    return this.owner.gid;
  }
  get kind(): 'file' {
    return 'file';
  }
  /** Derived, not stored: `/scope/` is always the prefix of `path`. */
  get scopePath(): string {
    return this.path.slice(this.scope.length + 2);
  }
  get stat(): NodeStat {
    return this;
  }
  get mode(): number {
    return this.owner.fileMode;
  }
  get nlink(): number {
    return 1;
  }
  get blksize(): number {
    return 4096;
  }
  get blocks(): number {
    return Math.ceil(this.size / 512);
  }
  get mtime(): number {
    return this.mtimeMs;
  }
  get atime(): number {
    return this.mtimeMs;
  }
  get ctime(): number {
    return this.mtimeMs;
  }
}

export class DirEntry implements DirNode, NodeStat {
  constructor(
    readonly ino: number,
    readonly path: string,
    readonly scope: ScopeName,
    private readonly listed: readonly string[],
    readonly mtime: number,
    readonly nlink: number,
    readonly owner: Owner,
  ) {}
  /** A getter so that a scope built on first use can list itself then (pending-scope.ts). */
  get names(): readonly string[] {
    return this.listed;
  }
  get uid(): number {
    return this.owner.uid;
  }
  get gid(): number {
    return this.owner.gid;
  }
  get kind(): 'dir' {
    return 'dir';
  }
  get stat(): NodeStat {
    return this;
  }
  get mode(): number {
    return this.owner.dirMode;
  }
  get size(): number {
    return 4096;
  }
  get blksize(): number {
    return 4096;
  }
  get blocks(): number {
    return 8;
  }
  get atime(): number {
    return this.mtime;
  }
  get ctime(): number {
    return this.mtime;
  }
}

/**
 * The mtime to report for `file` and the path's history, given the node it
 * replaces (if any) or the versions remembered for a removed path.
 */
export function reportedVersion(
  file: Pick<PlanFile, 'sha256' | 'size' | 'mtimeMs'>,
  previous: FileNode | undefined,
  remembered: readonly FileVersion[],
): { mtimeMs: number; history: readonly FileVersion[] } {
  if (previous !== undefined && previous.sha256 === file.sha256 && previous.planMtimeMs === file.mtimeMs) {
    return { mtimeMs: previous.mtimeMs, history: previous.history };
  }
  const older = previous === undefined ? remembered : versionsOf(previous);
  if (older.length === 0) return { mtimeMs: file.mtimeMs, history: NO_HISTORY };
  let mtimeMs = file.mtimeMs;
  while (older.some((v) => v.sha256 !== file.sha256 && v.size === file.size && v.mtimeMs === mtimeMs)) mtimeMs++;
  const history = older.filter((v) => v.sha256 !== file.sha256);
  if (history.length > VERSION_HISTORY - 1) history.length = VERSION_HISTORY - 1;
  return { mtimeMs, history: history.length === 0 ? NO_HISTORY : history };
}

/** A node's content and its history as plain values (never the node: old trees must not be retained). */
export function versionsOf(node: FileNode): FileVersion[] {
  return [{ sha256: node.sha256, size: node.size, mtimeMs: node.mtimeMs }, ...node.history];
}

export interface DirBuild {
  names: string[];
  mtimeMs: number;
  scope: ScopeName;
  subdirs: number;
  /** Undefined for the root. */
  readonly parent: DirBuild | undefined;
}

/** A directory's mtime is its newest descendant's, so `find -newer` works on directories too. */
export function bumpDirMtimes(dir: DirBuild, mtimeMs: number): void {
  for (let d: DirBuild | undefined = dir; d !== undefined && d.mtimeMs < mtimeMs; d = d.parent) d.mtimeMs = mtimeMs;
}
