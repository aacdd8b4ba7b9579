// Open directory handles of the libfuse 3 binding and what a READDIR or
// READDIRPLUS of one lists (native-fuse-adapter.ts answers). Offsets: 0 is
// ".", 1 is "..", 2 + i is the i-th name; an answer holds as many entries as
// the kernel's buffer can take at the smallest entry size, and the addon
// sends those that fit.
//
// A listing reads the tree it started in (offset 0, so a rewind starts
// afresh from the current tree); once the current tree no longer has the
// directory (its scope revoked, or the path removed) the handle lists nothing
// more, like a removed directory. A handle the addon opened itself (its fast
// path, FAST_DIR_BIT) is first seen here at its first READDIR, and starts its
// listing then, from the current tree.

import { parentPath, ROOT_INO, type DirNode, type Tree, type TreeNode } from '../../core/tree/tree.js';
import { FAST_DIR_BIT } from './native-addon-api.js';

/** Smallest directory entry libfuse writes (24-byte header + name padded to 8). */
const MIN_DIRENT = 32;
/** Smallest readdirplus entry: a 128-byte fuse_entry_out before it. */
const MIN_DIRENT_PLUS = MIN_DIRENT + 128;
/** Numbers per entry in replyDirPlus's stats. */
export const STAT_FIELDS = 7;

export interface ListingPage {
  readonly names: string[];
  readonly inos: number[];
  readonly modes: number[];
  /** The node of each entry ("." is the directory; ".." and a name the tree lost have none). */
  readonly nodes: (TreeNode | undefined)[];
}

export function childPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

export function listingPage(dir: DirNode, tree: Tree, parentIno: number, size: number, offset: number, plus: boolean): ListingPage {
  const page: ListingPage = { names: [], inos: [], modes: [], nodes: [] };
  const most = Math.ceil(size / (plus ? MIN_DIRENT_PLUS : MIN_DIRENT));
  const total = dir.names.length + 2;
  for (let i = offset; i < total && page.names.length < most; i++) {
    if (i < 2) {
      page.names.push(i === 0 ? '.' : '..');
      page.inos.push(i === 0 ? dir.stat.ino : parentIno);
      page.modes.push(dir.stat.mode);
      page.nodes.push(i === 0 ? dir : undefined);
      continue;
    }
    const name = dir.names[i - 2]!;
    const child = tree.get(childPath(dir.path, name));
    page.names.push(name);
    page.inos.push(child?.stat.ino ?? 0);
    page.modes.push(child?.stat.mode ?? 0);
    page.nodes.push(child);
  }
  return page;
}

/** Each entry's attributes for READDIRPLUS, STAT_FIELDS numbers apiece. */
export function listingStats(page: ListingPage, dir: DirNode): Float64Array {
  const stats = new Float64Array(page.names.length * STAT_FIELDS);
  page.nodes.forEach((node, j) => {
    // ".." of a directory whose parent is not at hand: its number and mode only (the kernel takes no lookup of it).
    const s = node?.stat ?? { ino: page.inos[j]!, mode: page.modes[j]!, size: 0, mtime: 0, nlink: 2, uid: dir.stat.uid, gid: dir.stat.gid };
    stats.set([s.ino, s.mode, s.size, s.mtime, s.nlink, s.uid, s.gid], j * STAT_FIELDS);
  });
  return stats;
}

interface OpenDir {
  readonly dir: DirNode;
  readonly tree: Tree;
  readonly parentIno: number;
}

export class DirHandles {
  private readonly open = new Map<number, OpenDir>();
  private next = 1;

  /** A new handle on `dir` (node id `ino`) of `tree`. */
  add(ino: number, dir: DirNode, tree: Tree): number {
    const fh = this.next;
    this.next = fh >= 0x3fffffff ? 1 : fh + 1;
    this.start(fh, ino, dir, tree);
    return fh;
  }

  private start(fh: number, ino: number, dir: DirNode, tree: Tree): OpenDir {
    const parent = ino === ROOT_INO ? undefined : tree.get(parentPath(dir.path));
    const open = { dir, tree, parentIno: parent?.stat.ino ?? ROOT_INO };
    this.open.set(fh, open);
    return open;
  }

  /**
   * The page a READDIR(PLUS) of `fh` at `offset` answers, with its directory;
   * `gone` once the directory left the current tree, undefined for a handle
   * never opened. `kernel` tells the node the kernel holds as a node id
   * (asked only for a fast-path handle seen here for the first time).
   */
  page(fh: number, ino: number, kernel: { given(ino: number): TreeNode | undefined }, current: Tree, size: number, offset: number, plus: boolean): { page: ListingPage; dir: DirNode } | 'gone' | undefined {
    let open = this.open.get(fh);
    if (open === undefined && fh >= FAST_DIR_BIT) {
      const path = ino === ROOT_INO ? '/' : kernel.given(ino)?.path;
      const dir = path === undefined ? undefined : current.get(path);
      if (dir?.kind !== 'dir' || dir.stat.ino !== ino) return 'gone';
      open = this.start(fh, ino, dir, current);
    }
    if (open === undefined) return undefined;
    const now = current.get(open.dir.path);
    if (now?.kind !== 'dir' || now.stat.ino !== open.dir.stat.ino) return 'gone';
    if (offset === 0 && open.tree !== current) {
      open = { ...open, dir: now, tree: current };
      this.open.set(fh, open);
    }
    return { page: listingPage(open.dir, open.tree, open.parentIno, size, offset, plus), dir: open.dir };
  }

  release(fh: number): void {
    this.open.delete(fh);
  }

  clear(): void {
    this.open.clear();
  }
}
