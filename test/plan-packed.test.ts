// The packed form of a plan (core/session/plan-packed.ts) from the control
// plane's encoding to the daemon's check: the same plan as its rows, the
// scope version hashed from the bytes as from the rows' text, no object per
// file made, and every malformed body refused as `unavailable`, naming what
// was wrong: its frame (packed-plan.ts) or a value in it (wire-check.ts).

import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { buildPlan, scopeVersion, snapshotScope, type Plan, type PlanFile, type ScopeSnapshot } from '../src/core/session/plan.js';
import { surveyFiles } from '../src/core/session/file-table.js';
import { ColumnarSnapshot, fileTable } from '../src/core/session/plan-columns.js';
import { FLOAT64_BYTES, PACKED_HEADER_OFFSET, packedScopeVersion, packScope, SHA256_BYTES } from '../src/core/session/plan-packed.js';
import { unpackPlan } from '../src/daemon/control-plane/packed-plan.js';
import { checkPlan, checkPlanChanges } from '../src/daemon/control-plane/wire-check.js';
import { serializePackedPlan } from '../src/server/http/plan-route.js';

const sha = (n: number) => n.toString(16).padStart(64, '0');
const FILES: PlanFile[] = [
  { path: 'DUTY.md', size: 3, mtimeMs: 0, sha256: sha(1) },
  { path: 'runbooks/db.md', size: 0, mtimeMs: 2_000, sha256: sha(2) },
  { path: 'runbooks/ü b.md', size: 9, mtimeMs: 3_000, sha256: sha(3) },
  { path: 'z/😀.md', size: 2 ** 40, mtimeMs: 1_700_000_000_123, sha256: 'f'.repeat(64) },
];

function planOf(scopes: ScopeSnapshot[]): Plan {
  return buildPlan({ sessionId: 'ses_1', threshold: 100, loadable: scopes, boundTeam: undefined, mounted: ['a'] });
}

const PLAN = planOf([snapshotScope('account', FILES), snapshotScope('team_a', [])]);
const body = (plan: Plan = PLAN, known?: Map<string, string>) => Buffer.concat(serializePackedPlan(plan, known));
const rowsOf = (p: Plan) => p.scopes.map((s) => ({ scope: s.scope, version: s.version, totalBytes: s.totalBytes, files: s.files }));

/** Where the first scope's sections start in PLAN's body, and its file count. */
function firstSections(b: Buffer): { at: number; count: number; pathBytes: number } {
  const headerBytes = b.readUInt32LE(8);
  const header = JSON.parse(b.toString('utf8', PACKED_HEADER_OFFSET, PACKED_HEADER_OFFSET + headerBytes)) as { scopes: { fileCount: number; pathBytes: number }[] };
  const first = header.scopes[0] as { fileCount: number; pathBytes: number };
  return { at: PACKED_HEADER_OFFSET + headerBytes, count: first.fileCount, pathBytes: first.pathBytes };
}

/** PLAN's body with its header replaced by `edit` of it (the sections kept). */
function withHeader(edit: (h: { scopes: Record<string, unknown>[] } & Record<string, unknown>) => void): Buffer {
  const b = body();
  const { at } = firstSections(b);
  const header = JSON.parse(b.toString('utf8', PACKED_HEADER_OFFSET, at)) as { scopes: Record<string, unknown>[] } & Record<string, unknown>;
  edit(header);
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(json.length);
  return Buffer.concat([b.subarray(0, 8), length, json, b.subarray(at)]);
}

/** PLAN's body with the first scope's sections changed in place by `edit`. */
function withSections(edit: (b: Buffer, s: { paths: number; sha256s: number; sizes: number; mtimesMs: number; count: number }) => void): Buffer {
  const b = body();
  const { at, count, pathBytes } = firstSections(b);
  const sha256s = at + pathBytes;
  const sizes = sha256s + SHA256_BYTES * count;
  edit(b, { paths: at, sha256s, sizes, mtimesMs: sizes + FLOAT64_BYTES * count, count });
  return b;
}

describe('the packed form', () => {
  it('is checked into the same plan as its rows, with no file object made', () => {
    const rowsRead = vi.spyOn(ColumnarSnapshot.prototype, 'files', 'get');
    let plan: Plan;
    try {
      plan = checkPlan(unpackPlan(body()));
      expect(plan.scopes.every((s) => s instanceof ColumnarSnapshot)).toBe(true);
      expect(rowsRead).not.toHaveBeenCalled();
    } finally {
      rowsRead.mockRestore();
    }
    expect({ ...plan, scopes: rowsOf(plan) }).toEqual({ ...PLAN, scopes: rowsOf(PLAN) });
  });

  it('sends a scope the daemon names at its version as a stub, and the rest whole', () => {
    const account = PLAN.scopes[0] as ScopeSnapshot;
    const changes = checkPlanChanges(unpackPlan(body(PLAN, new Map([['account', account.version.slice(0, 16)]]))));
    expect(changes.scopes[0]).toEqual({ scope: 'account', version: account.version, totalBytes: account.totalBytes, unchanged: true });
    expect(rowsOf({ ...PLAN, scopes: [changes.scopes[1] as ScopeSnapshot] })).toEqual(rowsOf({ ...PLAN, scopes: [PLAN.scopes[1] as ScopeSnapshot] }));
    // A full plan has no stubs.
    expect(() => checkPlan(unpackPlan(body(PLAN, new Map([['account', account.version.slice(0, 16)]]))))).toThrow(/invalid plan \(scope fields\)/);
  });

  it('takes a path twice, as rows are taken, and floors fractional mtimes', () => {
    const twice = planOf([snapshotScope('account', [FILES[0] as PlanFile, { ...(FILES[0] as PlanFile), size: 4, sha256: sha(2) }])]);
    expect(rowsOf(checkPlan(unpackPlan(body(twice))))).toEqual(rowsOf(twice));
    const fractional = withSections((b, s) => b.writeDoubleLE(2_000.75, s.mtimesMs + FLOAT64_BYTES));
    expect((checkPlan(unpackPlan(fractional)).scopes[0] as ScopeSnapshot).files.map((f) => f.mtimeMs)).toEqual([0, 2_000, 3_000, 1_700_000_000_123]);
  });

  it('property: the version hashed from the bytes is the rows\' version, and the plan the rows\' plan', () => {
    const char = fc.constantFrom('a', 'B', '0', '_', '-', '.', ' ', 'ü', '中', '😀', '\u{e000}', '\u{ffff}');
    const segment = fc.array(char, { minLength: 1, maxLength: 40 }).map((cs) => cs.join('')).filter((s) => s !== '.' && s !== '..');
    // Few names, so that paths clash: the same path twice, a path below a file.
    const segment2 = fc.oneof(segment, fc.constantFrom('a', 'b'));
    const path = fc.array(segment2, { minLength: 1, maxLength: 4 }).map((ss) => ss.join('/'));
    const file = fc.record({ path, size: fc.nat(), mtimeMs: fc.nat(), sha256: fc.integer({ min: 0, max: 1_000_000 }).map(sha) });
    fc.assert(
      fc.property(fc.array(file, { maxLength: 60 }), (files) => {
        const snapshot = snapshotScope('team_a', files);
        const { head, sections } = packScope(snapshot);
        const shas = sections.subarray(head.pathBytes, head.pathBytes + SHA256_BYTES * head.fileCount);
        expect(packedScopeVersion(sections.subarray(0, head.pathBytes), shas, head.fileCount)).toBe(scopeVersion(files));
        const plan = planOf([snapshot]);
        const checked = checkPlan(unpackPlan(body(plan)));
        expect(rowsOf(checked)).toEqual(rowsOf(plan));
        // The survey made on the way is the one a pass of its own makes (duplicates and paths below a file included).
        const table = fileTable(checked.scopes[0] as ScopeSnapshot);
        expect(table.survey).toBeDefined();
        expect(table.survey).toEqual(surveyFiles(table));
        expect(table.survey).toEqual(surveyFiles(fileTable(snapshot)));
      }),
      { numRuns: 200 },
    );
  });

  it('hashes across many pieces, and the longest pack path, as the rows do', () => {
    // Sixteen names of 255 bytes: the most a path of at most 4 096 bytes can hold.
    const long = Array.from({ length: 16 }, () => 'ü'.repeat(127) + 'x').join('/');
    const files: PlanFile[] = [{ path: long, size: 1, mtimeMs: 1, sha256: sha(7) }];
    for (let i = 0; i < 3_000; i++) files.push({ path: `d/${String(i).padStart(5, '0')}-${'n'.repeat(60)}.md`, size: i, mtimeMs: i, sha256: sha(i) });
    const plan = planOf([snapshotScope('account', files)]);
    expect(Buffer.byteLength(long)).toBe(4_095);
    expect(rowsOf(checkPlan(unpackPlan(body(plan))))).toEqual(rowsOf(plan));
    // Longer than a piece: hashed where it lies (no pack path is, but the hash must not depend on that).
    const huge = [{ path: 'h'.repeat(70_000), size: 0, mtimeMs: 0, sha256: sha(1) }, ...files];
    const { head, sections } = packScope(snapshotScope('account', huge));
    const shas = sections.subarray(head.pathBytes, head.pathBytes + SHA256_BYTES * head.fileCount);
    expect(packedScopeVersion(sections.subarray(0, head.pathBytes), shas, head.fileCount)).toBe(scopeVersion(huge));
  });

  const unsorted = planOf([{ ...snapshotScope('account', FILES), files: [FILES[1] as PlanFile, FILES[0] as PlanFile, FILES[2] as PlanFile, FILES[3] as PlanFile] }]);
  const climbing = planOf([snapshotScope('account', [{ ...(FILES[0] as PlanFile), path: '../etc/passwd' }])]);
  const refusals: [string, Buffer, RegExp][] = [
    ['JSON instead', Buffer.from(JSON.stringify(PLAN)), /packed plan \(no packed plan header\)/],
    ['another revision', Buffer.concat([Buffer.from('kfsplan2'), body().subarray(8)]), /packed plan \(no packed plan header\)/],
    ['a body shorter than its frame', Buffer.from('kfsplan1'), /packed plan \(no packed plan header\)/],
    ['a header longer than the body', (() => { const b = body(); b.writeUInt32LE(b.length, 8); return b; })(), /packed plan \(header longer than the body\)/],
    ['a header that is not JSON', withHeader(() => undefined).fill(0x7b, PACKED_HEADER_OFFSET, PACKED_HEADER_OFFSET + 2), /packed plan \(header is not JSON\)/],
    ['a header without scopes', withHeader((h) => delete (h as Record<string, unknown>).scopes), /packed plan \(header without a list of scopes\)/],
    ['a header that is a list', (() => { const json = Buffer.from('[]'); const n = Buffer.alloc(4); n.writeUInt32LE(2); return Buffer.concat([Buffer.from('kfsplan1'), n, json]); })(), /packed plan \(header without a list of scopes\)/],
    ['a scope without its counts', withHeader((h) => delete h.scopes[0]?.pathBytes), /packed plan \(a scope sent whole must give fileCount and pathBytes, and no files or columns\)/],
    ['a fractional file count', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).fileCount = 1.5)), /packed plan \(a scope sent whole must give fileCount and pathBytes, and no files or columns\)/],
    ['a scope with rows too', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).files = [])), /packed plan \(a scope sent whole must give fileCount and pathBytes, and no files or columns\)/],
    ['a scope with columns too', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).columns = {})), /packed plan \(a scope sent whole must give fileCount and pathBytes, and no files or columns\)/],
    ['sections cut short', body().subarray(0, body().length - 1), /packed plan \(sections longer than the body\)/],
    ['a count larger than the body', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).fileCount = 2 ** 40)), /packed plan \(sections longer than the body\)/],
    ['a byte after the last scope', Buffer.concat([body(), Buffer.from([0])]), /packed plan \(bytes after the last scope\)/],
    ['a newline inside a path', withSections((b, s) => (b[s.paths + 2] = 0x0a)), /plan \(packed paths do not match the file count\)/],
    ['the last newline missing', withSections((b, s) => (b[s.sha256s - 1] = 0x61)), /plan \(packed paths do not match the file count\)/],
    ['paths that are not UTF-8', withSections((b, s) => (b[s.paths + 1] = 0xff)), /plan \(file path\)/],
    ['a path that climbs out', body(climbing), /plan \(file path\)/],
    ['a negative size', withSections((b, s) => b.writeDoubleLE(-1, s.sizes)), /plan \(file size\)/],
    ['a fractional size', withSections((b, s) => b.writeDoubleLE(0.5, s.sizes + FLOAT64_BYTES)), /plan \(file size\)/],
    ['a size beyond 2^53', withSections((b, s) => b.writeDoubleLE(2 ** 53, s.sizes)), /plan \(file size\)/],
    ['a size that is not a number', withSections((b, s) => b.writeDoubleLE(Number.NaN, s.sizes)), /plan \(file size\)/],
    ['a negative mtime', withSections((b, s) => b.writeDoubleLE(-1, s.mtimesMs)), /plan \(file mtime\)/],
    ['an infinite mtime', withSections((b, s) => b.writeDoubleLE(Number.POSITIVE_INFINITY, s.mtimesMs + FLOAT64_BYTES)), /plan \(file mtime\)/],
    ['an mtime that is not a number', withSections((b, s) => b.writeDoubleLE(Number.NaN, s.mtimesMs)), /plan \(file mtime\)/],
    ['a forged scope version', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).version = sha(9))), /plan \(scope version does not match its files\)/],
    ['a forged plan version', withHeader((h) => (h.version = sha(9))), /plan \(version does not match its scopes\)/],
    ['a bad scope name', withHeader((h) => ((h.scopes[0] as Record<string, unknown>).scope = 'teams')), /plan \(scope name\)/],
  ];
  it.each(refusals)('refuses %s as unavailable, naming it', (_name, b, message) => {
    let caught: unknown;
    try {
      checkPlan(unpackPlan(b));
    } catch (err) {
      caught = err;
    }
    expect(caught).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/^control plane sent an invalid /) });
    expect((caught as Error).message).toMatch(message);
  });

  it('a byte changed on the way, in a path or a sha256, is refused: the version is hashed from the bytes', () => {
    const flipped = [withSections((b, s) => (b[s.sha256s + SHA256_BYTES + 5] = 0x5a)), withSections((b, s) => (b[s.paths] = 0x65))];
    for (const b of flipped) expect(() => checkPlan(unpackPlan(b))).toThrow(/invalid plan \(scope version does not match its files\)/);
    expect(checkPlan(unpackPlan(body())).version).toBe(PLAN.version);
  });

  it('paths out of order are refused, though the version (hashed sorted) matches', () => {
    expect((unsorted.scopes[0] as ScopeSnapshot).version).toBe(scopeVersion(FILES));
    expect(() => checkPlan(unpackPlan(body(unsorted)))).toThrow(/invalid plan \(file columns not sorted by path\)/);
  });

  it('a `packed` a JSON plan names is refused: only a packed body can give a scope its sections', () => {
    const json = JSON.parse(JSON.stringify(PLAN)) as { scopes: Record<string, unknown>[] };
    (json.scopes[0] as Record<string, unknown>).packed = { count: 0 };
    expect(() => checkPlan(json)).toThrow(/invalid plan \(scope fields\)/);
    const header = withHeader((h) => ((h.scopes[1] as Record<string, unknown>).packed = { count: 0 }));
    // From a packed header the key is replaced by the sections cut for that scope.
    expect(rowsOf(checkPlan(unpackPlan(header)))).toEqual(rowsOf(PLAN));
  });
});
