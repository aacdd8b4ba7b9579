// The plan's columnar form (core/session/plan-columns.ts) as the daemon's
// wire check reads it: the same plan as its rows, each value checked as a
// row's is, the paths sorted, the version hashed over the columns, exactly
// one of `files` and `columns` per scope, and every refusal `unavailable`
// naming what was wrong.

import { describe, expect, it } from 'vitest';
import { buildPlan, snapshotScope, type PlanFile, type ScopeSnapshot } from '../src/core/session/plan.js';
import { ColumnarSnapshot, columnarScope, ColumnTable, toColumns } from '../src/core/session/plan-columns.js';
import { checkPlan, checkPlanChanges } from '../src/daemon/control-plane/wire-check.js';

const sha = (n: number) => n.toString(16).padStart(64, '0');
const FILES: PlanFile[] = [
  { path: 'DUTY.md', size: 3, mtimeMs: 1_000, sha256: sha(1) },
  { path: 'runbooks/db.md', size: 0, mtimeMs: 2_000, sha256: sha(2) },
  { path: 'runbooks/ü b.md', size: 9, mtimeMs: 3_000, sha256: sha(3) },
];
const ROWS = buildPlan({ sessionId: 'ses_1', threshold: 100, loadable: [snapshotScope('account', FILES), snapshotScope('team_a', [])], boundTeam: undefined, mounted: [] });

/** The plan's JSON in the columnar form, as GET /v1/plan?form=columns sends it. */
function columnsBody(): { scopes: Record<string, unknown>[] } & Record<string, unknown> {
  return JSON.parse(JSON.stringify({ ...ROWS, scopes: ROWS.scopes.map(columnarScope) })) as { scopes: Record<string, unknown>[] };
}

/** The columnar body with its first scope changed by `edit`. */
function withScope(edit: (s: Record<string, unknown>) => void): unknown {
  const body = columnsBody();
  edit(body.scopes[0] as Record<string, unknown>);
  return body;
}

/** The columnar body with the first scope's columns changed by `edit`. */
const withColumns = (edit: (c: Record<string, unknown[]>) => void): unknown => withScope((s) => edit(s.columns as Record<string, unknown[]>));

const plain = (s: ScopeSnapshot) => ({ scope: s.scope, version: s.version, totalBytes: s.totalBytes, files: s.files });

describe('the columnar form', () => {
  it('is checked into the same plan as its rows, with no file object made', () => {
    const plan = checkPlan(columnsBody());
    expect(plan.version).toBe(ROWS.version);
    expect(plan.scopes.every((s) => s instanceof ColumnarSnapshot)).toBe(true);
    expect(plan.scopes.map(plain)).toEqual(ROWS.scopes.map(plain));
    expect(checkPlanChanges(columnsBody()).scopes.map((s) => plain(s as ScopeSnapshot))).toEqual(ROWS.scopes.map(plain));
  });

  it('a snapshot builds its rows once, on first read', () => {
    const s = new ColumnarSnapshot('account', 'v', 12, new ColumnTable(toColumns(FILES)));
    expect(s.files).toEqual(FILES);
    expect(s.files).toBe(s.files);
  });

  it('takes a path twice and an mtime of 0, as rows are taken', () => {
    const odd: PlanFile[] = [
      { path: 'DUTY.md', size: 3, mtimeMs: 0, sha256: sha(1) },
      { path: 'DUTY.md', size: 4, mtimeMs: 5, sha256: sha(2) },
    ];
    const rows = buildPlan({ sessionId: 'ses_1', threshold: 100, loadable: [snapshotScope('account', odd)], boundTeam: undefined, mounted: [] });
    const columns = JSON.parse(JSON.stringify({ ...rows, scopes: rows.scopes.map(columnarScope) })) as unknown;
    expect(checkPlan(columns).scopes.map(plain)).toEqual(checkPlan(JSON.parse(JSON.stringify(rows))).scopes.map(plain));
  });

  it('floors fractional mtimes as rows are floored, and keeps whole ones as they came', () => {
    const fractional = withColumns((c) => (c.mtimesMs = [1_000.75, 2_000, 3_000.5]));
    expect((checkPlan(fractional).scopes[0] as ScopeSnapshot).files.map((f) => f.mtimeMs)).toEqual([1_000, 2_000, 3_000]);
    const body = columnsBody();
    const mtimes = (body.scopes[0] as { columns: { mtimesMs: number[] } }).columns.mtimesMs;
    expect(((checkPlan(body).scopes[0] as ColumnarSnapshot).table as ColumnTable).columns.mtimesMs).toBe(mtimes);
  });

  const refusals: [string, unknown, RegExp][] = [
    ['columns not an object', withScope((s) => (s.columns = 'all of them')), /plan \(file columns\)$/],
    ['a column missing', withColumns((c) => delete c.sha256s), /plan \(file columns\)$/],
    ['a column not an array', withColumns((c) => (c.sizes = { 0: 3 } as unknown as unknown[])), /plan \(file columns\)$/],
    ['columns null', withScope((s) => (s.columns = null)), /plan \(file columns\)$/],
    ['sizes shorter than paths', withColumns((c) => c.sizes?.pop()), /file columns of different lengths/],
    ['mtimes shorter than paths', withColumns((c) => c.mtimesMs?.pop()), /file columns of different lengths/],
    ['sha256s longer than paths', withColumns((c) => c.sha256s?.push(sha(4))), /file columns of different lengths/],
    ['paths not sorted', withColumns((c) => c.paths?.reverse()), /not sorted by path/],
    ['a path that climbs out', withColumns((c) => (c.paths = ['../etc/passwd', 'runbooks/db.md', 'runbooks/ü b.md'])), /plan \(file path\)/],
    ['a path not a string', withColumns((c) => (c.paths = [7, 'runbooks/db.md', 'runbooks/ü b.md'])), /plan \(file path\)/],
    ['a negative size', withColumns((c) => (c.sizes = [3, -1, 9])), /plan \(file size\)/],
    ['a fractional size', withColumns((c) => (c.sizes = [3, 0.5, 9])), /plan \(file size\)/],
    ['a negative mtime', withColumns((c) => (c.mtimesMs = [1_000, 2_000, -1])), /plan \(file mtime\)/],
    ['an mtime that is not a number', withColumns((c) => (c.mtimesMs = [1_000, null, 3_000])), /plan \(file mtime\)/],
    ['an mtime in a string', withColumns((c) => (c.mtimesMs = [1_000, '2000', 3_000])), /plan \(file mtime\)/],
    ['a scope that is not an object', { ...columnsBody(), scopes: ['account'] }, /plan \(scope\)$/],
    ['a scope name that is not one', withScope((s) => (s.scope = 'teams')), /plan \(scope name\)/],
    ['a scope name that is not a string', withScope((s) => (s.scope = 7)), /plan \(scope name\)/],
    ['a version that is not a string', withScope((s) => (s.version = 7)), /plan \(scope fields\)/],
    ['a negative totalBytes', withScope((s) => (s.totalBytes = -1)), /plan \(scope fields\)/],
    ['a sha256 that is not one', withColumns((c) => (c.sha256s = [sha(1), 'x'.repeat(64), sha(3)])), /plan \(file sha256\)/],
  ];
  it.each(refusals)('refuses %s as unavailable, naming it', (_name, body, message) => {
    for (const check of [checkPlan, checkPlanChanges]) {
      let caught: unknown;
      try {
        check(body);
      } catch (e) {
        caught = e;
      }
      expect(caught).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/^control plane sent an invalid /) });
      expect((caught as Error).message).toMatch(message);
    }
  });

  it('a byte changed on the way, in a path or a sha256, is refused: the version is hashed over the columns', () => {
    const flipped = [
      withColumns((c) => (c.sha256s = [sha(1), sha(9), sha(3)])),
      withColumns((c) => (c.paths = ['DUTY.md', 'runbooks/dc.md', 'runbooks/ü b.md'])),
      withScope((s) => (s.version = sha(7))),
    ];
    for (const body of flipped) expect(() => checkPlan(body)).toThrow(/invalid plan \(scope version does not match its files\)/);
  });

  it('a scope has rows or columns, never both and never neither', () => {
    const rows = JSON.parse(JSON.stringify(ROWS)) as { scopes: Record<string, unknown>[] };
    const both = withScope((s) => (s.files = rows.scopes[0]?.files));
    const neither = withScope((s) => delete s.columns);
    const rowsNotAList = withScope((s) => {
      delete s.columns;
      s.files = 'all of them';
    });
    for (const body of [both, neither, rowsNotAList]) expect(() => checkPlan(body)).toThrow(/invalid plan \(scope fields\)/);
    expect(checkPlan(rows).scopes.map(plain)).toEqual(ROWS.scopes.map(plain));
    const flippedRow = JSON.parse(JSON.stringify(ROWS)) as { scopes: { files: { sha256: string }[] }[] };
    (flippedRow.scopes[0]?.files[1] as { sha256: string }).sha256 = sha(9);
    expect(() => checkPlan(flippedRow)).toThrow(/invalid plan \(scope version does not match its files\)/);
  });
});
