// The in-memory tree: layout, modes, sizes, listings, scope removal, and the
// page-cache rule (a path never reports the same size+mtime for two
// contents), checked against a reference model with property tests.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PlanFile } from '../src/core/session/plan.js';
import { sha, treePlan as plan } from './helpers/tree-plan.js';
import { DIR_MODE, FILE_MODE, Tree, type FileNode } from '../src/core/tree/tree.js';



const file = (path: string, n: number, size = 10, mtimeMs = 1_000_000): PlanFile => ({ path, size, mtimeMs, sha256: sha(n) });

describe('Tree.fromPlan', () => {
  const tree = Tree.fromPlan(
    plan({
      team_b: [file('DUTY.md', 1), file('runbooks/x.md', 2, 30, 2_000_000)],
      account: [file('DUTY.md', 3, 5), file('a/b/c/deep.md', 4, 7, 3_000_000)],
    }),
    undefined,
    { uid: 1000, gid: 1000, emptyDirMtimeMs: 5 },
  );

  it('lists scopes at the root, account first, and every directory sorted', () => {
    expect(tree.readdirNames('/')).toEqual(['account', 'team_b']);
    expect(tree.readdirNames('/account')).toEqual(['DUTY.md', 'a']);
    expect(tree.readdirNames('/account/a/b/c')).toEqual(['deep.md']);
    expect(tree.readdirNames('/team_b/runbooks')).toEqual(['x.md']);
    expect(tree.scopes).toEqual(['account', 'team_b']);
    expect(tree.fileCount).toBe(4);
    expect(tree.totalBytes).toBe(10 + 30 + 5 + 7);
  });

  it('files are 0444 with the plan size and mtime; directories 0555 with their newest descendant mtime', () => {
    const f = tree.get('/team_b/runbooks/x.md') as FileNode;
    expect(f.kind).toBe('file');
    expect(f.stat).toMatchObject({ mode: FILE_MODE, size: 30, mtime: 2_000_000, atime: 2_000_000, ctime: 2_000_000, uid: 1000, gid: 1000, nlink: 1, blocks: 1 });
    expect(f.scope).toBe('team_b');
    expect(f.scopePath).toBe('runbooks/x.md');
    expect(tree.get('/account/a')?.stat).toMatchObject({ mode: DIR_MODE, mtime: 3_000_000, size: 4096 });
    expect(tree.get('/')?.stat.mtime).toBe(3_000_000);
    expect((tree.get('/account/a/b') as { stat: { nlink: number } }).stat.nlink).toBe(3);
    expect(tree.get('/account')?.stat).toMatchObject({ mtime: 3_000_000, nlink: 3 }); // a scope's own directory: DUTY.md and a/
  });

  it('unknown paths are undefined; fileByScopePath finds files only', () => {
    expect(tree.get('/team_c')).toBeUndefined();
    expect(tree.get('/account/DUTY.md/x')).toBeUndefined();
    expect(tree.fileByScopePath('account/a/b/c/deep.md')?.sha256).toBe(sha(4));
    expect(tree.fileByScopePath('account/a')).toBeUndefined();
  });

  it('an empty tree has only the root', () => {
    const empty = Tree.empty();
    expect(empty.readdirNames('/')).toEqual([]);
    expect(empty.fileCount).toBe(0);
  });

  it('withoutScope drops the scope, its files and its root entry, and clears the version', () => {
    const without = tree.withoutScope('team_b');
    expect(without.readdirNames('/')).toEqual(['account']);
    expect(without.get('/team_b')).toBeUndefined();
    expect(without.get('/team_b/runbooks/x.md')).toBeUndefined();
    expect(without.get('/account/DUTY.md')).toBeDefined();
    expect(without.fileCount).toBe(2);
    expect(without.version).toBe('');
    expect(tree.get('/team_b/DUTY.md')).toBeDefined(); // immutable
  });
});

describe('page-cache rule: reported mtimes', () => {
  const at = (t: Tree, path: string) => (t.get(path) as FileNode).stat.mtime;

  it('unchanged content keeps its mtime; content changed at the same size and mtime is bumped', () => {
    const t1 = Tree.fromPlan(plan({ account: [file('f.md', 1)] }), undefined);
    const t2 = Tree.fromPlan(plan({ account: [file('f.md', 1)] }), t1);
    expect(at(t2, '/account/f.md')).toBe(1_000_000);
    const t3 = Tree.fromPlan(plan({ account: [file('f.md', 2)] }), t2);
    expect(at(t3, '/account/f.md')).toBe(1_000_001);
    // Stays bumped while the plan doesn't change.
    const t4 = Tree.fromPlan(plan({ account: [file('f.md', 2)] }), t3);
    expect(at(t4, '/account/f.md')).toBe(1_000_001);
  });

  it('A@t → B@now → B@t does not report t for B (remembers more than the last version)', () => {
    const t1 = Tree.fromPlan(plan({ account: [file('f.md', 1, 10, 1000)] }), undefined);
    const t2 = Tree.fromPlan(plan({ account: [file('f.md', 2, 10, 9000)] }), t1);
    const t3 = Tree.fromPlan(plan({ account: [file('f.md', 2, 10, 1000)] }), t2);
    expect(at(t3, '/account/f.md')).not.toBe(1000);
  });

  it('a removed path that comes back with other content at the same size and mtime is bumped', () => {
    const t1 = Tree.fromPlan(plan({ account: [file('f.md', 1), file('g.md', 9)] }), undefined);
    const t2 = Tree.fromPlan(plan({ account: [file('g.md', 9)] }), t1);
    const t3 = Tree.fromPlan(plan({ account: [file('g.md', 9)] }), t2);
    const t4 = Tree.fromPlan(plan({ account: [file('f.md', 2), file('g.md', 9)] }), t3);
    expect(at(t4, '/account/f.md')).toBe(1_000_001);
  });

  it('changedPaths lists paths whose content changed, and paths back with other content; not new, touched or removed ones', () => {
    const t1 = Tree.fromPlan(plan({ account: [file('edit.md', 1), file('touch.md', 2), file('gone.md', 3), file('back.md', 4), file('same.md', 5)] }), undefined);
    expect(t1.changedPaths).toEqual([]);
    const t2 = Tree.fromPlan(plan({ account: [file('edit.md', 11), file('touch.md', 2, 10, 2_000_000), file('same.md', 5), file('new.md', 6)] }), t1);
    expect(t2.changedPaths).toEqual(['/account/edit.md']);
    const t3 = Tree.fromPlan(plan({ account: [file('back.md', 14), file('edit.md', 11), file('gone.md', 3), file('same.md', 5)] }), t2);
    expect(t3.changedPaths).toEqual(['/account/back.md']); // gone.md came back with the bytes it had
    expect(Tree.fromPlan(plan({ account: [file('edit.md', 11)] }), t3).changedPaths).toEqual([]);
    expect(t3.withoutScope('account').changedPaths).toEqual([]);
  });

  it('property: no two of a path\'s last 4 distinct contents share size and mtime', () => {
    const version = fc.record({ content: fc.integer({ min: 0, max: 5 }), mtime: fc.integer({ min: 0, max: 3 }), present: fc.boolean() });
    fc.assert(
      fc.property(fc.array(version, { minLength: 1, maxLength: 30 }), (steps) => {
        let tree: Tree | undefined;
        // Reference: every (content, size, reported mtime) the path has shown, in order.
        const shown: { content: number; size: number; mtime: number }[] = [];
        for (const s of steps) {
          // The same content always has the same size (it is the same bytes).
          const size = (s.content % 2) + 1;
          tree = Tree.fromPlan(plan({ account: s.present ? [file('f.md', s.content, size, s.mtime)] : [] }), tree);
          const node = tree.get('/account/f.md') as FileNode | undefined;
          if (node === undefined) continue;
          shown.push({ content: s.content, size, mtime: node.stat.mtime });
          // Against the last 4 distinct other contents shown at this path.
          const others: typeof shown = [];
          for (let i = shown.length - 2; i >= 0 && others.length < 3; i--) {
            const o = shown[i]!;
            if (o.content !== s.content && !others.some((x) => x.content === o.content)) others.push(o);
          }
          for (const o of others) {
            if (o.size === size && o.mtime === node.stat.mtime) return false;
          }
          // Never far from the plan's mtime.
          if (node.stat.mtime < s.mtime || node.stat.mtime > s.mtime + 4) return false;
        }
        return true;
      }),
      { numRuns: 500 },
    );
  });
});

describe('scale', () => {
  it('builds 20 000 files and answers lookups from a Map', () => {
    const files: PlanFile[] = [];
    for (let i = 0; i < 20_000; i++) files.push(file(`dir${i % 100}/sub${i % 7}/f${i}.md`, i, 100));
    const t = Tree.fromPlan(plan({ account: files }), undefined);
    expect(t.fileCount).toBe(20_000);
    expect(t.readdirNames('/account')).toHaveLength(100);
    expect((t.get('/account/dir42/sub0/f42.md') as FileNode).size).toBe(100);
    const t2 = Tree.fromPlan(plan({ account: files }), t);
    expect(t2.get('/account/dir42/sub0/f42.md')?.stat.mtime).toBe(1_000_000);
  });
});
