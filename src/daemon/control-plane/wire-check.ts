// Shape checks for what the control plane sends the daemon. A body that
// parses as JSON but is not the promised shape is treated like garbage on the
// wire (`unavailable`), never trusted: a bad plan must not become a bad tree.

import { isAscii } from 'node:buffer';
import { KnowledgeError } from '../../core/errors.js';
import { packPathProblem } from '../../core/paths.js';
import { planVersion, scopeVersion, sortedScopeVersion, type Plan, type PlanChanges, type PlanFile, type ScopeSnapshot, type UnchangedScope } from '../../core/session/plan.js';
import { FileSurveyor, type FileTable } from '../../core/session/file-table.js';
import { ColumnarSnapshot, ColumnTable, type FileColumns } from '../../core/session/plan-columns.js';
import { FLOAT64_BYTES, packedScopeVersion, PackedTable } from '../../core/session/plan-packed.js';
import { parseScope } from '../../core/scope.js';
import { isSha256 } from '../../core/sha256.js';
import { PackedFiles } from './packed-plan.js';
import type { CanLoadAnswer, CanLoadRefusal, CanLoadRequest, CanLoadResponse, GrantResponse, ManifestResponse, ReadPage, ReadResponse, ReminderResponse, SessionView } from '../../core/wire.js';

/** Plain ASCII names, no `.`/`..` segment: valid without the full check (most paths, much faster). */
const PLAIN_PATH = /^(?!\.\.?(?:\/|$))[\w.\- ]{1,255}(?:\/(?!\.\.?(?:\/|$))[\w.\- ]{1,255})*$/;

export function pathOk(path: string): boolean {
  return (path.length <= 4096 && PLAIN_PATH.test(path)) || packPathProblem(path) === null;
}

function bad(what: string): never {
  throw new KnowledgeError('unavailable', `control plane sent an invalid ${what}`);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
/** A plan mtime: finite and not negative (fractions are floored later). */
const isMtime = (v: unknown): v is number => Number.isFinite(v) && (v as number) >= 0;
const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

function checkFile(v: unknown): PlanFile {
  if (!isObject(v)) bad('plan (file entry)');
  const { path, size, mtimeMs, sha256 } = v;
  if (typeof path !== 'string' || !pathOk(path)) bad('plan (file path)');
  if (!isCount(size)) bad('plan (file size)');
  if (!isMtime(mtimeMs)) bad('plan (file mtime)');
  if (!isSha256(sha256)) bad('plan (file sha256)');
  // The entry itself when it is already exact (the usual case): 100 000 copies are not free.
  if (Number.isInteger(mtimeMs)) return v as unknown as PlanFile;
  return { path, size, mtimeMs: Math.floor(mtimeMs), sha256 };
}

/**
 * One file of a scope sent as columns or packed, each value checked as a
 * row's is, and its path not before `previous` (the rows' order, which the
 * version is hashed in).
 */
function checkSortedFile(path: unknown, previous: string, size: unknown, mtimeMs: unknown): asserts path is string {
  if (typeof path !== 'string' || !pathOk(path)) bad('plan (file path)');
  if (path < previous) bad('plan (file columns not sorted by path)');
  if (!isCount(size)) bad('plan (file size)');
  if (!isMtime(mtimeMs)) bad('plan (file mtime)');
}

/**
 * A scope's file columns (`form=columns`), each value checked as a row's
 * is, and the paths sorted (the rows' order, which the version is hashed
 * in). No object per file is made here (ColumnarSnapshot).
 */
function checkColumns(v: unknown): FileColumns {
  if (!isObject(v)) bad('plan (file columns)');
  const { paths, sizes, mtimesMs, sha256s } = v;
  if (!Array.isArray(paths) || !Array.isArray(sizes) || !Array.isArray(mtimesMs) || !Array.isArray(sha256s)) bad('plan (file columns)');
  const n = paths.length;
  if (sizes.length !== n || mtimesMs.length !== n || sha256s.length !== n) bad('plan (file columns of different lengths)');
  let whole = true;
  let previous = '';
  for (let i = 0; i < n; i++) {
    const path: unknown = paths[i];
    const mtimeMs: unknown = mtimesMs[i];
    checkSortedFile(path, previous, sizes[i], mtimeMs);
    previous = path;
    whole &&= Number.isInteger(mtimeMs);
    if (!isSha256(sha256s[i])) bad('plan (file sha256)');
  }
  // Whole milliseconds, as checkFile makes them: the usual case keeps the array as it came.
  const mtimes = whole ? (mtimesMs as number[]) : (mtimesMs as number[]).map(Math.floor);
  return { paths: paths as string[], sizes: sizes as number[], mtimesMs: mtimes, sha256s: sha256s as string[] };
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const LITTLE_ENDIAN = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f;

/** A packed scope's paths section as text: ASCII as it is, anything else only as valid UTF-8. */
function pathsText(bytes: Buffer): string {
  if (isAscii(bytes)) return bytes.toString('latin1');
  try {
    return UTF8.decode(bytes);
  } catch {
    bad('plan (file path)');
  }
}

/** A packed section of float64s (little-endian), copied into an array of its own. */
function float64s(bytes: Buffer, count: number): Float64Array {
  const values = new Float64Array(count);
  if (LITTLE_ENDIAN) new Uint8Array(values.buffer).set(bytes);
  else for (let i = 0; i < count; i++) values[i] = bytes.readDoubleLE(i * FLOAT64_BYTES);
  return values;
}

/**
 * A packed scope's files (plan-packed.ts), each value checked as a row's is
 * and the paths sorted, as the columns are. A sha256 needs no check: any
 * 32 bytes are one, and the version covers them.
 */
function checkPacked(p: PackedFiles): FileTable {
  const count = p.count;
  const text = pathsText(p.paths);
  // Where each path starts: every path ends with a newline, and nothing follows the last one.
  const starts = new Uint32Array(count + 1);
  const sizes = float64s(p.sizes, count);
  const mtimesMs = float64s(p.mtimesMs, count);
  // Each path is cut once, here: the survey the mount needs of the scope rides along.
  const surveyor = new FileSurveyor();
  let surveyed = true;
  let previous = '';
  let at = 0;
  for (let i = 0; i < count; i++) {
    const end = text.indexOf('\n', at);
    if (end === -1) bad('plan (packed paths do not match the file count)');
    const path = text.slice(at, end);
    starts[i] = at;
    at = end + 1;
    const size = sizes[i] as number;
    const mtimeMs = mtimesMs[i] as number;
    checkSortedFile(path, previous, size, mtimeMs);
    previous = path;
    // Whole milliseconds, as checkFile makes them.
    if (!Number.isInteger(mtimeMs)) mtimesMs[i] = Math.floor(mtimeMs);
    surveyed &&= surveyor.add(i, path, size, mtimesMs[i] as number);
  }
  if (at !== text.length) bad('plan (packed paths do not match the file count)');
  starts[count] = at;
  // Its own copy of the sha256s: the rest of the body (paths, numbers) is copied already and may go.
  return new PackedTable(text, starts, Buffer.from(p.sha256s), sizes, mtimesMs, surveyed ? surveyor.survey : undefined);
}

function checkScope(v: unknown): ScopeSnapshot {
  if (!isObject(v)) bad('plan (scope)');
  const { scope, version, totalBytes, files, columns, packed } = v;
  if (typeof scope !== 'string' || parseScope(scope) === null) bad('plan (scope name)');
  if (typeof version !== 'string' || !isCount(totalBytes)) bad('plan (scope fields)');
  // Cut from a packed body (packed-plan.ts): JSON cannot make a PackedFiles.
  if (packed instanceof PackedFiles) {
    const table = checkPacked(packed);
    if (packedScopeVersion(packed.paths, packed.sha256s, packed.count) !== version) bad('plan (scope version does not match its files)');
    return new ColumnarSnapshot(scope, version, totalBytes, table);
  }
  if (packed !== undefined) bad('plan (scope fields)');
  // Rows (`files`) or columns, never both: a scope must not say two things about its files.
  const asRows = Array.isArray(files) && columns === undefined;
  if (!asRows && (files !== undefined || columns === undefined)) bad('plan (scope fields)');
  if (!asRows) {
    const c = checkColumns(columns);
    const hashed = sortedScopeVersion(c.paths.length, (i) => c.paths[i] as string, (i) => c.sha256s[i] as string);
    if (hashed !== version) bad('plan (scope version does not match its files)');
    return new ColumnarSnapshot(scope, version, totalBytes, new ColumnTable(c));
  }
  const checked = files.map(checkFile);
  // The version hashes every (path, sha256): a byte changed on the way (a
  // flipped file name still parses) must not become a phantom entry.
  if (scopeVersion(checked) !== version) bad('plan (scope version does not match its files)');
  return { scope, version, totalBytes, files: checked };
}

export function checkPlan(v: unknown): Plan {
  if (!isObject(v)) bad('plan');
  const { sessionId, version, threshold, mode, mounted, scopes } = v;
  if (typeof sessionId !== 'string' || typeof version !== 'string' || !isCount(threshold)) bad('plan (header)');
  if (mode !== 'all-loadable' && mode !== 'bound-and-mounted') bad('plan (mode)');
  if (!isStringArray(mounted) || !Array.isArray(scopes)) bad('plan (lists)');
  const checked = scopes.map(checkScope);
  if (planVersion(mode, checked, mounted) !== version) bad('plan (version does not match its scopes)');
  return { sessionId, version, threshold, mode, mounted, scopes: checked };
}

function checkScopeOrStub(v: unknown): ScopeSnapshot | UnchangedScope {
  if (!isObject(v) || v.unchanged === undefined) return checkScope(v);
  const { scope, version, totalBytes, unchanged } = v;
  if (unchanged !== true || typeof scope !== 'string' || parseScope(scope) === null) bad('plan (unchanged scope)');
  if (!isSha256(version) || !isCount(totalBytes)) bad('plan (unchanged scope fields)');
  return { scope, version, totalBytes, unchanged: true };
}

/** A plan whose scopes may be stubs (`unchanged`); the plan version still covers every scope's version. */
export function checkPlanChanges(v: unknown): PlanChanges {
  if (!isObject(v)) bad('plan');
  const { sessionId, version, threshold, mode, mounted, scopes } = v;
  if (typeof sessionId !== 'string' || typeof version !== 'string' || !isCount(threshold)) bad('plan (header)');
  if (mode !== 'all-loadable' && mode !== 'bound-and-mounted') bad('plan (mode)');
  if (!isStringArray(mounted) || !Array.isArray(scopes)) bad('plan (lists)');
  const checked = scopes.map(checkScopeOrStub);
  if (planVersion(mode, checked, mounted) !== version) bad('plan (version does not match its scopes)');
  return { sessionId, version, threshold, mode, mounted, scopes: checked };
}

export function checkSession(v: unknown): SessionView {
  if (!isObject(v)) bad('session');
  const { sessionId, kind, creator, team, mounted } = v;
  if (typeof sessionId !== 'string' || (kind !== 'team' && kind !== 'personal') || typeof creator !== 'string') bad('session');
  if (team !== undefined && typeof team !== 'string') bad('session (team)');
  if (!isStringArray(mounted)) bad('session (mounted)');
  return team === undefined ? { sessionId, kind, creator, mounted } : { sessionId, kind, creator, team, mounted };
}

export function checkGrant(v: unknown, scope: string): GrantResponse {
  if (!isObject(v) || v.allowed !== true || v.scope !== scope) bad('grant');
  return { scope, allowed: true };
}

export function checkReadResponse(v: unknown): ReadResponse {
  if (!isObject(v)) bad('read response');
  const { path, sha256, size, contentBase64, page, mounted } = v;
  if (typeof path !== 'string' || !isSha256(sha256) || !isCount(size)) bad('read response');
  if (typeof mounted !== 'boolean') bad('read response');
  if (page !== undefined) return { path, sha256, size, page: checkReadPage(page), mounted };
  if (typeof contentBase64 !== 'string') bad('read response');
  return { path, sha256, size, contentBase64, mounted };
}

const REFUSAL_CODES: readonly string[] = ['not_found', 'denied', 'membership_unavailable'];

/** One answer per scope asked, in order: an answer about another scope, or a missing one, is garbage. */
export function checkCanLoadResponse(v: unknown, req: CanLoadRequest): CanLoadResponse {
  if (!isObject(v) || v.for !== req.for || !Array.isArray(v.answers) || v.answers.length !== req.scopes.length) bad('can-load answer');
  const answers = v.answers.map((a: unknown, i): CanLoadAnswer => {
    if (!isObject(a) || a.scope !== req.scopes[i]) bad('can-load answer');
    const scope = req.scopes[i] as string;
    if (a.allowed === true) return { scope, allowed: true };
    const error = a.error;
    if (a.allowed !== false || !isObject(error) || typeof error.code !== 'string' || !REFUSAL_CODES.includes(error.code) || typeof error.message !== 'string') bad('can-load answer');
    return { scope, allowed: false, error: { code: error.code as CanLoadRefusal['code'], message: error.message } };
  });
  return { for: req.for, answers };
}

function checkReadPage(v: unknown): ReadPage {
  if (!isObject(v)) bad('read response (page)');
  const { content, offset, totalChars, contentSha256 } = v;
  if (typeof content !== 'string' || !isCount(offset) || !isCount(totalChars) || !isSha256(contentSha256)) bad('read response (page)');
  return { content, offset, totalChars, contentSha256 };
}

export function checkManifest(v: unknown): ManifestResponse {
  if (!isObject(v) || typeof v.text !== 'string' || typeof v.sha256 !== 'string') bad('manifest');
  return { text: v.text, sha256: v.sha256 };
}

export function checkReminder(v: unknown): ReminderResponse {
  if (!isObject(v)) bad('reminder');
  const { text, date, changed, deleted } = v;
  if (typeof text !== 'string' || typeof date !== 'string' || !isStringArray(changed) || !isStringArray(deleted)) bad('reminder');
  return { text, date, changed, deleted };
}
