// What the kernel must forget when one tree replaces another, for a FUSE
// binding that caches entries and attributes for long and is told of
// changes (libfuse 3's notify_inval_entry / notify_inval_inode).
//
// - An entry (parent directory inode + name) whose inode changed or went
//   away: a new file version, a removed file or directory, a file that turned
//   into a directory. Only the topmost changed name is listed: forgetting a
//   directory's entry forgets everything the kernel cached below it.
// - An entry that is new under a directory that was already there: the
//   kernel may hold a cached "no such file" for it.
// - A directory that is still the same inode but whose listing, mtime or
//   link count changed: its attributes and cached listing.
// File inodes themselves are never invalidated: a changed file is a new
// inode (tree.ts), so pages cached for the old one stay right for
// descriptors still open on it.

import { parentPath, type DirNode, type Tree, type TreeNode } from './tree.js';

export interface EntryChange {
  readonly parentIno: number;
  readonly name: string;
}

export interface TreeChanges {
  readonly entries: readonly EntryChange[];
  /** Directory inodes whose attributes or listing changed. */
  readonly dirs: readonly number[];
}

function sameInode(a: TreeNode | undefined, b: TreeNode | undefined): boolean {
  return a !== undefined && b !== undefined && a.stat.ino === b.stat.ino;
}

function sameListing(a: DirNode, b: DirNode): boolean {
  if (a.names === b.names) return true;
  if (a.names.length !== b.names.length) return false;
  for (let i = 0; i < a.names.length; i++) if (a.names[i] !== b.names[i]) return false;
  return true;
}

/** The entry for `path` when its parent directory is the same inode in both trees (else the parent's own entry covers it). */
function entryUnderKeptParent(path: string, before: Tree, after: Tree): EntryChange | undefined {
  const parent = parentPath(path);
  const old = before.get(parent);
  if (old?.kind !== 'dir' || !sameInode(old, after.get(parent))) return undefined;
  return { parentIno: old.stat.ino, name: path.slice(parent === '/' ? 1 : parent.length + 1) };
}

export function treeChanges(before: Tree, after: Tree): TreeChanges {
  const entries: EntryChange[] = [];
  const dirs: number[] = [];
  if (before === after) return { entries, dirs };
  // Only what was built can have reached the kernel; a deferred scope stays unbuilt.
  for (const node of before.builtNodes()) {
    if (node.path === '/') continue;
    const now = after.get(node.path);
    if (now === node || sameInode(node, now)) continue;
    const entry = entryUnderKeptParent(node.path, before, after);
    if (entry !== undefined) entries.push(entry);
  }
  for (const node of after.builtNodes()) {
    const old = before.get(node.path);
    if (old === node) continue; // the same node (a deferred scope both trees hold): nothing changed
    if (old === undefined) {
      const entry = entryUnderKeptParent(node.path, before, after);
      if (entry !== undefined) entries.push(entry);
      continue;
    }
    if (node.kind !== 'dir' || old.kind !== 'dir' || old.stat.ino !== node.stat.ino) continue;
    if (!sameListing(old, node) || old.stat.mtime !== node.stat.mtime || old.stat.nlink !== node.stat.nlink) dirs.push(node.stat.ino);
  }
  return { entries, dirs };
}
