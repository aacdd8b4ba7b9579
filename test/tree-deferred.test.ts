// Scopes built on first use (core/tree/pending-scope.ts): a deferred tree
// answers exactly as a tree built at once, through a lineage of plans, and
// builds a scope only when something inside it is asked for.

import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { snapshotScope, type Plan, type PlanFile, type ScopeSnapshot } from '../src/core/session/plan.js';
import { ColumnarSnapshot, ColumnTable, fileTable, toColumns } from '../src/core/session/plan-columns.js';
import { packedPlan, sha, treePlan as plan } from './helpers/tree-plan.js';
import { surveyFiles } from '../src/core/session/file-table.js';
import { treeChanges } from '../src/core/tree/tree-changes.js';
import { Tree, type DirNode, type FileNode, type TreeNode, type TreeOptions } from '../src/core/tree/tree.js';

const file = (path: string, n: number, size = 10, mtimeMs = 1_000_000): PlanFile => ({ path, size, mtimeMs, sha256: sha(n) });


const AT_ONCE: TreeOptions = { deferScopes: false };

/** The same plan as the daemon gets it in the columnar form: no file objects until something reads `files`. */
const columnar = (p: Plan): Plan => ({ ...p, scopes: p.scopes.map((s) => new ColumnarSnapshot(s.scope, s.version, s.totalBytes, new ColumnTable(toColumns(s.files)))) });

/** Each form a plan reaches the daemon in: rows, columns, packed. */
const FORMS = { rows: (p: Plan): Plan => p, columns: columnar, packed: packedPlan };

/** surveyFiles over every form of the same files, which must agree. */
function survey(files: PlanFile[]): ReturnType<typeof surveyFiles> {
  const rows = surveyFiles(fileTable({ scope: 'team_a', version: '', totalBytes: 0, files }));
  expect(surveyFiles(fileTable(new ColumnarSnapshot('team_a', '', 0, new ColumnTable(toColumns(files)))))).toEqual(rows);
  const unsorted: Plan = { sessionId: 's', version: 'v', threshold: 0, mode: 'all-loadable', mounted: [], scopes: [{ scope: 'team_a', version: '', totalBytes: 0, files }] };
  expect(surveyFiles(fileTable(packedPlan(unsorted).scopes[0] as ScopeSnapshot))).toEqual(rows);
  return rows;
}

/** A node without its inode number, which is the one thing a deferred build may number differently. */
function shape(node: TreeNode | undefined): unknown {
  if (node === undefined) return undefined;
  const { mode, uid, gid, size, nlink, mtime, blocks } = node.stat;
  const common = { kind: node.kind, path: node.path, scope: node.scope, mode, uid, gid, size, nlink, mtime, blocks };
  if (node.kind === 'dir') return { ...common, names: [...(node as DirNode).names] };
  const f = node as FileNode;
  return { ...common, sha256: f.sha256, planMtimeMs: f.planMtimeMs, scopePath: f.scopePath, history: f.history };
}

/** treeChanges with inode numbers turned into the paths they stand for in `before`. */
function changedByPath(before: Tree, after: Tree): { entries: string[]; dirs: string[] } {
  const changes = treeChanges(before, after);
  const pathOf = new Map([...before.all()].map((n) => [n.stat.ino, n.path]));
  const under = (ino: number, name: string) => `${pathOf.get(ino) === '/' ? '' : pathOf.get(ino)}/${name}`;
  return { entries: changes.entries.map((e) => under(e.parentIno, e.name)).sort(), dirs: changes.dirs.map((ino) => pathOf.get(ino) ?? `?${ino}`).sort() };
}

function paths(tree: Tree): string[] {
  return [...tree.all()].map((n) => n.path).sort();
}

function expectSameTree(deferred: Tree, atOnce: Tree): void {
  expect(deferred.fileCount).toBe(atOnce.fileCount);
  expect(deferred.totalBytes).toBe(atOnce.totalBytes);
  expect(shape(deferred.get('/'))).toEqual(shape(atOnce.get('/')));
  for (const scope of atOnce.scopes) expect(shape(deferred.get(`/${scope}`))).toEqual(shape(atOnce.get(`/${scope}`)));
  expect(paths(deferred)).toEqual(paths(atOnce));
  for (const node of atOnce.all()) expect(shape(deferred.get(node.path))).toEqual(shape(node));
  const inos = [...deferred.all()].map((n) => n.stat.ino);
  expect(new Set(inos).size).toBe(inos.length);
}

// Few names, so that clashes are common: `a` both a file and a directory, the same path twice, `a.md` next to `a/`.
const segment = fc.constantFrom('a', 'b', 'a.md', 'a-b', 'b c');
const planFile = fc.record({
  path: fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('/')),
  content: fc.integer({ min: 0, max: 3 }),
  size: fc.integer({ min: 0, max: 3 }),
  mtime: fc.integer({ min: 0, max: 3 }),
});
const scopeFiles = fc.array(planFile, { maxLength: 12 }).map((fs) => fs.map((f) => file(f.path, f.content, f.size, f.mtime)));
const plans = fc.record({ account: scopeFiles, team_a: scopeFiles, team_b: scopeFiles }, { requiredKeys: ['account'] });

describe('deferred scopes', () => {
  const first = plan({
    account: [file('DUTY.md', 1, 5)],
    team_a: [file('README.md', 2, 7, 2_000_000), file('runbooks/x.md', 3)],
    team_b: [file('a/b/c.md', 4, 9, 3_000_000)],
  });

  it('a new tree builds no scope: the root, its listing, each scope directory and the counts come from the plan alone', () => {
    const t = Tree.fromPlan(first, undefined, { emptyDirMtimeMs: 5 });
    expect(t.unbuiltScopes()).toEqual(['account', 'team_a', 'team_b']);
    expect(t.readdirNames('/')).toEqual(['account', 'team_a', 'team_b']);
    expect(t.get('/')?.stat).toMatchObject({ mtime: 3_000_000, nlink: 5 });
    expect(t.get('/team_a')?.stat).toMatchObject({ mtime: 2_000_000, nlink: 3 });
    expect(t.get('/team_c')).toBeUndefined();
    expect(t.fileCount).toBe(4);
    expect(t.totalBytes).toBe(5 + 7 + 10 + 9);
    expect([...t.plannedFiles()].map((f) => `${f.scope}/${f.scopePath}`)).toEqual(['account/DUTY.md', 'team_a/README.md', 'team_a/runbooks/x.md', 'team_b/a/b/c.md']);
    expect([...t.builtNodes()].map((n) => n.path).sort()).toEqual(['/', '/account', '/team_a', '/team_b']);
    expect(t.unbuiltScopes()).toEqual(['account', 'team_a', 'team_b']);
  });

  it('a lookup or listing inside a scope builds that scope only', () => {
    const t = Tree.fromPlan(first, undefined);
    expect((t.get('/team_a/runbooks/x.md') as FileNode).sha256).toBe(sha(3));
    expect(t.unbuiltScopes()).toEqual(['account', 'team_b']);
    expect(t.readdirNames('/team_b')).toEqual(['a']);
    expect(t.unbuiltScopes()).toEqual(['account']);
    expect(t.fileByScopePath('account/DUTY.md')?.size).toBe(5);
    expect(t.unbuiltScopes()).toEqual([]);
  });

  /** A plan in `columnar`'s form, deferred, kept and built without a row read. */
  function neverRows(columnar: (p: Plan) => Plan): void {
    const rowsRead = vi.spyOn(ColumnarSnapshot.prototype, 'files', 'get');
    try {
      const t = Tree.fromPlan(columnar(first), undefined, { emptyDirMtimeMs: 5 });
      expect(t.readdirNames('/')).toEqual(['account', 'team_a', 'team_b']);
      expect(t.get('/team_a')?.stat).toMatchObject({ mtime: 2_000_000, nlink: 3 });
      expect(t.fileCount).toBe(4);
      expect([...t.plannedFiles()]).toHaveLength(4);
      const next = Tree.fromPlan(columnar(first), t, { emptyDirMtimeMs: 5 });
      expect(next.unbuiltScopes()).toEqual(['account', 'team_a', 'team_b']);
      expect(rowsRead).not.toHaveBeenCalled();
      expect(next.readdirNames('/team_a')).toEqual(['README.md', 'runbooks']);
      expect(next.unbuiltScopes()).toEqual(['account', 'team_b']);
      expect((next.get('/team_a/runbooks/x.md') as FileNode).sha256).toBe(sha(3));
      expect(Tree.fromPlan(columnar(first), undefined, AT_ONCE).fileCount).toBe(4);
      expect(rowsRead).not.toHaveBeenCalled();
    } finally {
      rowsRead.mockRestore();
    }
  }

  it('a scope that came as columns never makes an object per file: not deferred, kept by a later plan, nor built', () => neverRows(columnar));

  it('a scope that came packed never makes an object per file: not deferred, kept by a later plan, nor built', () => neverRows(packedPlan));

  it('a later plan at the same version keeps an unbuilt scope only with the same sizes, mtimes and order, in either form', () => {
    const touched = (mtimeMs: number, size: number) =>
      plan({ account: [file('DUTY.md', 1, 5)], team_a: [file('README.md', 2, size, mtimeMs), file('runbooks/x.md', 3)], team_b: [file('a/b/c.md', 4, 9, 3_000_000)] });
    for (const form of Object.values(FORMS)) {
      // A fresh tree each time: a scope not kept is built against the old tree's, which builds that one.
      const after = (p: Plan) => Tree.fromPlan(form(p), Tree.fromPlan(form(first), undefined));
      const later = touched(2_500_000, 7);
      expect(later.scopes[1]?.version).toBe(first.scopes[1]?.version);
      expect(after(later).get('/team_a/README.md')?.stat).toMatchObject({ mtime: 2_500_000, size: 7 });
      expect(after(touched(2_000_000, 8)).get('/team_a/README.md')?.stat).toMatchObject({ mtime: 2_000_000, size: 8 });
      expect(after(touched(2_000_000, 7)).unbuiltScopes()).toEqual(['account', 'team_a', 'team_b']);
    }
    // The same files as rows out of order, sizes swapped: the version is the same, the files are not.
    const t = Tree.fromPlan(plan({ team_a: [file('a', 1, 1), file('b', 2, 2)] }), undefined);
    const swapped = plan({ team_a: [file('a', 1, 1), file('b', 2, 2)] });
    const team = swapped.scopes.find((s) => s.scope === 'team_a') as ScopeSnapshot;
    const reordered = { ...swapped, scopes: swapped.scopes.map((s) => (s === team ? { ...s, files: [file('b', 2, 1), file('a', 1, 2)] } : s)) };
    const next = Tree.fromPlan(reordered, t);
    expect([next.get('/team_a/a')?.stat.size, next.get('/team_a/b')?.stat.size]).toEqual([2, 1]);
  });

  it('the scope directory is the same node, with the same inode, before and after its build', () => {
    const t = Tree.fromPlan(first, undefined);
    const dir = t.get('/team_a');
    const ino = dir?.stat.ino;
    expect(t.readdirNames('/team_a')).toEqual(['README.md', 'runbooks']);
    expect(t.get('/team_a')).toBe(dir);
    expect(t.get('/team_a')?.stat.ino).toBe(ino);
  });

  it('a sorted plan with a file and a directory of one name, and a path twice, is surveyed as NodeBuilder keeps it', () => {
    const files = [file('a', 1, 1), file('a.md', 2, 2), file('a/b', 3, 4), file('b', 4, 8), file('b', 5, 16), file('c/d', 6, 32, 7)];
    expect(survey(files)).toEqual({ fileCount: 4, totalBytes: 1 + 2 + 8 + 32, newestMtimeMs: 1_000_000, subdirs: 1, dropped: new Set([2, 4]) });
    expect(survey([file('b', 1), file('a', 2)])).toBeUndefined();
    for (const odd of ['', '/a', 'a/', 'a//b']) expect(survey([file(odd, 1)])).toBeUndefined();
    expect(survey([])).toEqual({ fileCount: 0, totalBytes: 0, newestMtimeMs: -Infinity, subdirs: 0, dropped: undefined });
  });

  it('a plan listing one scope twice is merged as a build at once merges it', () => {
    const twice = { ...first, scopes: [...first.scopes, snapshotScope('team_a', [file('README.md', 9), file('z.md', 8)])] };
    const t = Tree.fromPlan(twice, undefined);
    expectSameTree(t, Tree.fromPlan(twice, undefined, AT_ONCE));
    expect((t.get('/team_a/README.md') as FileNode).sha256).toBe(sha(2));
    expect(t.get('/team_a/z.md')).toBeDefined();
  });

  it('property: a deferred tree equals one built at once, clashes included', () => {
    fc.assert(
      fc.property(plans, (scopes) => {
        const p = plan(scopes);
        const atOnce = Tree.fromPlan(p, undefined, { ...AT_ONCE, uid: 7, emptyDirMtimeMs: 2 });
        expectSameTree(Tree.fromPlan(p, undefined, { uid: 7, emptyDirMtimeMs: 2 }), atOnce);
        expectSameTree(Tree.fromPlan(columnar(p), undefined, { uid: 7, emptyDirMtimeMs: 2 }), atOnce);
        expectSameTree(Tree.fromPlan(packedPlan(p), undefined, { uid: 7, emptyDirMtimeMs: 2 }), atOnce);
      }),
      { numRuns: 300 },
    );
  });

  it('property: through a lineage of plans, with scopes looked into at random, it answers as a lineage built at once', () => {
    // Each plan of the deferred lineage in either form: a scope kept unbuilt is compared across forms.
    const step = fc.record({ scopes: plans, look: fc.subarray(['account', 'team_a', 'team_b']), revoke: fc.boolean(), form: fc.constantFrom(...Object.values(FORMS)) });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 6 }), (steps) => {
        let deferred: Tree | undefined;
        let atOnce: Tree | undefined;
        for (const s of steps) {
          const p = plan(s.scopes);
          const [beforeDeferred, beforeAtOnce] = [deferred, atOnce];
          deferred = s.revoke && deferred !== undefined ? Tree.empty({}, deferred) : Tree.fromPlan(s.form(p), deferred);
          atOnce = s.revoke && atOnce !== undefined ? Tree.empty(AT_ONCE, atOnce) : Tree.fromPlan(p, atOnce, AT_ONCE);
          expect(new Set(deferred.changedPaths)).toEqual(new Set(atOnce.changedPaths));
          if (beforeDeferred !== undefined && beforeAtOnce !== undefined) {
            // What the kernel is told, by path: first, while the deferred scopes are still unbuilt.
            expect(changedByPath(beforeDeferred, deferred)).toEqual(changedByPath(beforeAtOnce, atOnce));
            // A node keeps its inode across the swap in one lineage exactly when it does in the other.
            const kept = (before: Tree, after: Tree) => paths(after).filter((path) => before.get(path)?.stat.ino === after.get(path)?.stat.ino);
            expect(kept(beforeDeferred, deferred)).toEqual(kept(beforeAtOnce, atOnce));
          }
          for (const scope of s.look) deferred.get(`/${scope}/a`);
          expectSameTree(deferred, atOnce);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('an unchanged scope nobody looked into is carried to the next tree unbuilt; a changed one is built against the old', () => {
    const t1 = Tree.fromPlan(first, undefined);
    const t2 = Tree.fromPlan(plan({ account: [file('DUTY.md', 1, 5)], team_a: [file('README.md', 2, 7, 2_000_000), file('runbooks/x.md', 3)], team_b: [file('a/b/c.md', 40, 9, 3_000_000)] }), t1);
    expect(t2.unbuiltScopes()).toEqual(['account', 'team_a']);
    // team_b's file is new content at the same size and mtime: a new inode, its mtime bumped up to the root.
    const changes = treeChanges(t1, t2);
    expect(t2.unbuiltScopes()).toEqual(['account', 'team_a']);
    const pathOf = new Map([...t1.all()].map((n) => [n.stat.ino, n.path]));
    expect(changes.entries.map((e) => `${pathOf.get(e.parentIno)}/${e.name}`)).toEqual(['/team_b/a/b/c.md']);
    expect(changes.dirs.map((ino) => pathOf.get(ino)).sort()).toEqual(['/', '/team_b', '/team_b/a', '/team_b/a/b']);
    // Built late, from the lineage's counter: no number any other node of either tree has.
    const inos = new Set([...t1.all(), ...t2.all()].filter((n) => n.kind === 'file').map((n) => `${n.path}:${n.stat.ino}`));
    const byIno = new Map<number, string>();
    for (const entry of inos) {
      const [path, ino] = entry.split(':') as [string, string];
      expect(byIno.get(Number(ino)) ?? path).toBe(path);
      byIno.set(Number(ino), path);
    }
    expect(t2.get('/team_a/README.md')).toBe(t1.get('/team_a/README.md'));
  });
});
