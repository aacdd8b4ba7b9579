// Inode numbers across trees and what the kernel must forget when one tree
// replaces another (tree-changes.ts): exactly the changed names and
// directories, never a file inode, and nothing for an unchanged plan.

import { describe, expect, it } from 'vitest';
import type { PlanFile } from '../src/core/session/plan.js';
import { sha, treePlan as plan } from './helpers/tree-plan.js';
import { treeChanges } from '../src/core/tree/tree-changes.js';
import { ROOT_INO, Tree } from '../src/core/tree/tree.js';

const file = (path: string, n: number, size = 10): PlanFile => ({ path, size, mtimeMs: 1_000_000 + n, sha256: sha(n) });


const ino = (tree: Tree, path: string) => tree.get(path)?.stat.ino;
const BASE = { account: [file('a.md', 1), file('dir/b.md', 2), file('dir/c.md', 3)], team_x: [file('t.md', 4)] };

describe('tree inode numbers', () => {
  const first = Tree.fromPlan(plan(BASE), undefined);

  it('the root is 1; every node has its own number', () => {
    expect(ino(first, '/')).toBe(ROOT_INO);
    const all = [...first.all()].map((n) => n.stat.ino);
    expect(new Set(all).size).toBe(all.length);
  });

  it('an unchanged file and a kept directory keep their numbers; a new version, a new path and a file turned directory get new ones', () => {
    const next = Tree.fromPlan(plan({ ...BASE, account: [file('a.md', 9), file('dir/b.md', 2), file('dir/c.md/inner.md', 3), file('new.md', 5)] }), first);
    expect(ino(next, '/account/dir/b.md')).toBe(ino(first, '/account/dir/b.md'));
    expect(ino(next, '/account/dir')).toBe(ino(first, '/account/dir'));
    expect(ino(next, '/account')).toBe(ino(first, '/account'));
    const earlier = new Set([...first.all()].map((n) => n.stat.ino));
    for (const path of ['/account/a.md', '/account/dir/c.md', '/account/dir/c.md/inner.md', '/account/new.md']) {
      expect(earlier.has(ino(next, path)!), path).toBe(false);
    }
  });

  it('numbers are not reused after a scope is removed, the session revoked, or a removed file comes back', () => {
    const without = first.withoutScope('team_x');
    const empty = Tree.empty({}, without);
    const back = Tree.fromPlan(plan(BASE), empty);
    const earlier = new Set([...first.all()].map((n) => n.stat.ino));
    for (const node of back.all()) if (node.path !== '/') expect(earlier.has(node.stat.ino), node.path).toBe(false);
    expect(ino(back, '/')).toBe(ROOT_INO);
  });
});

describe('treeChanges', () => {
  const first = Tree.fromPlan(plan(BASE), undefined);

  it('the same plan again changes nothing', () => {
    const same = Tree.fromPlan(plan(BASE), first);
    expect(treeChanges(first, same)).toEqual({ entries: [], dirs: [] });
    expect(treeChanges(first, first)).toEqual({ entries: [], dirs: [] });
  });

  it('an edit is one entry under its directory and no directory (same names, same mtime only when the edit is older)', () => {
    const edited = Tree.fromPlan(plan({ ...BASE, account: [file('a.md', 1), file('dir/b.md', 7), file('dir/c.md', 3)] }), first);
    const changes = treeChanges(first, edited);
    expect(changes.entries).toEqual([{ parentIno: ino(first, '/account/dir'), name: 'b.md' }]);
    // The directory's mtime follows its newest file, so its attributes are dropped too.
    expect(changes.dirs).toEqual(expect.arrayContaining([ino(first, '/account/dir')]));
    expect(changes.dirs).not.toContain(ino(first, '/account/a.md'));
  });

  it('a removal, an addition and a file turned directory: the topmost names, and the directories whose listings changed', () => {
    const next = Tree.fromPlan(plan({ account: [file('a.md', 1), file('dir/c.md/inner.md', 3), file('dir/new/deep.md', 6)], team_x: [file('t.md', 4)] }), first);
    const changes = treeChanges(first, next);
    const dir = ino(first, '/account/dir')!;
    expect(changes.entries).toEqual(
      expect.arrayContaining([
        { parentIno: dir, name: 'b.md' },
        { parentIno: dir, name: 'c.md' },
        { parentIno: dir, name: 'new' },
      ]),
    );
    expect(changes.entries).toHaveLength(3); // nothing below the new directory or the one that replaced c.md
    expect(changes.dirs).toContain(dir);
  });

  it('a scope leaving is one entry under the root and the root itself', () => {
    const changes = treeChanges(first, first.withoutScope('team_x'));
    expect(changes.entries).toEqual([{ parentIno: ROOT_INO, name: 'team_x' }]);
    expect(changes.dirs).toEqual([ROOT_INO]);
  });
});
