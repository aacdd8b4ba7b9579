// The publication format in object storage (pure: no I/O). Under the store's
// prefix:
//
//   blobs/<sha256>                        file bytes, content-addressed
//   indexes/<scope>/<version>.json        one immutable index per scope version
//   directories/<sha256>.json             directory.json, content-addressed
//   current.json                          the pointer: which of the above are current
//   publications/<time>-<sha256>.json     a copy of every pointer publish wrote (the history gc reads)
//
// Everything but the pointer is immutable and named by its content, so it is
// written first and never overwritten with anything different; the pointer
// is written last. A reader that follows the pointer finds a whole
// publication, and one still holding an older pointer still finds every
// object it names. A scope's version is the same hash the plan uses (path
// and sha256 of every file), so an index is checked against its own name.

import { KnowledgeError } from './errors.js';
import { packPathProblem } from './paths.js';
import { comparePaths, scopeVersion, type PlanFile, type ScopeSnapshot } from './session/plan.js';
import { compareScopes, parseScope, type ScopeName } from './scope.js';
import { isSha256, sha256Hex } from './sha256.js';

export const PUBLICATION_FORMAT = 1;
export const POINTER_KEY = 'current.json';
export const BLOB_PREFIX = 'blobs/';
export const HISTORY_PREFIX = 'publications/';

/** Largest pointer a reader accepts (a few hundred bytes per scope). */
export const MAX_POINTER_BYTES = 4 * 1024 * 1024;
/** Largest index a reader accepts (about 150 bytes per file). */
export const MAX_INDEX_BYTES = 256 * 1024 * 1024;
/** Largest total of one publication's indexes a reader accepts (what it holds for them, whatever their number). */
export const MAX_PUBLICATION_INDEX_BYTES = 512 * 1024 * 1024;
/** Largest directory.json a reader accepts. */
export const MAX_DIRECTORY_BYTES = 64 * 1024 * 1024;

export interface Pointer {
  readonly format: typeof PUBLICATION_FORMAT;
  /** When `publish` wrote it (ISO 8601); informational. */
  readonly publishedAt: string;
  /** sha256 of the directory.json bytes. */
  readonly directory: string;
  /** Scope → its version (the index to read), sorted account first. */
  readonly scopes: Readonly<Record<ScopeName, string>>;
}

export interface IndexDocument {
  readonly format: typeof PUBLICATION_FORMAT;
  readonly scope: ScopeName;
  readonly version: string;
  readonly files: readonly PlanFile[];
}


export function blobKey(sha256: string): string {
  return `${BLOB_PREFIX}${sha256}`;
}

export function indexKey(scope: ScopeName, version: string): string {
  return `indexes/${scope}/${version}.json`;
}

export function directoryKey(sha256: string): string {
  return `directories/${sha256}.json`;
}

/**
 * Where a copy of `pointer` is kept in the history: its publication time
 * (compact, so keys sort by time) and the sha256 of its bytes. Written
 * before the pointer, so every pointer ever current is in the history.
 */
export function historyKey(pointer: Pointer): string {
  const time = pointer.publishedAt.replace(/[-:]/g, '');
  return `${HISTORY_PREFIX}${time}-${sha256Hex(serializePointer(pointer))}.json`;
}

/** The blobs, indexes and directory.json one publication names, as keys: what gc keeps. */
export function pointerKeys(pointer: Pointer): string[] {
  return [directoryKey(pointer.directory), ...Object.entries(pointer.scopes).map(([scope, version]) => indexKey(scope, version))];
}

/** A malformed publication object: `key` says which. Refused whole by readers. */
export class PublicationError extends KnowledgeError {
  constructor(
    readonly key: string,
    problem: string,
  ) {
    super('unavailable', `${key}: ${problem}`);
    this.name = 'PublicationError';
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseJson(bytes: Buffer, key: string): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    // The parser quotes what it choked on: keep that readable (it may be binary garbage).
    const detail = (err instanceof Error ? err.message : String(err)).replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
    throw new PublicationError(key, `not valid JSON (${detail})`);
  }
}

export function pointerFor(directorySha: string, scopes: readonly Pick<ScopeSnapshot, 'scope' | 'version'>[], publishedAt: string): Pointer {
  const sorted = [...scopes].sort((a, b) => compareScopes(a.scope, b.scope));
  return { format: PUBLICATION_FORMAT, publishedAt, directory: directorySha, scopes: Object.fromEntries(sorted.map((s) => [s.scope, s.version])) };
}

/** True when two pointers name the same publication (the time aside). */
export function samePublication(a: Pointer, b: Pointer): boolean {
  const sa = Object.entries(a.scopes);
  const sb = Object.entries(b.scopes);
  return a.directory === b.directory && sa.length === sb.length && sa.every(([scope, version]) => b.scopes[scope] === version);
}

export function serializePointer(pointer: Pointer): Buffer {
  return Buffer.from(`${JSON.stringify(pointer, null, 2)}\n`, 'utf8');
}

export function parsePointer(bytes: Buffer, key = POINTER_KEY): Pointer {
  const value = parseJson(bytes, key);
  if (!isObject(value)) throw new PublicationError(key, 'expected an object with "format", "directory" and "scopes"');
  if (value['format'] !== PUBLICATION_FORMAT) throw new PublicationError(key, `unsupported format ${JSON.stringify(value['format'])} (this version reads format ${PUBLICATION_FORMAT})`);
  const publishedAt = value['publishedAt'];
  if (typeof publishedAt !== 'string') throw new PublicationError(key, '"publishedAt" must be a string');
  if (!isSha256(value['directory'])) throw new PublicationError(key, '"directory" must be a sha256 (64 lowercase hex digits)');
  const scopes = value['scopes'];
  if (!isObject(scopes)) throw new PublicationError(key, '"scopes" must map scope names to versions');
  for (const [scope, version] of Object.entries(scopes)) {
    if (parseScope(scope) === null) throw new PublicationError(key, `scopes: "${scope}" is not a scope name (account or team_<id>)`);
    if (!isSha256(version)) throw new PublicationError(key, `scopes.${scope}: expected a version (64 lowercase hex digits)`);
  }
  return { format: PUBLICATION_FORMAT, publishedAt, directory: value['directory'], scopes: scopes as Record<string, string> };
}

export function serializeIndex(snapshot: ScopeSnapshot): Buffer {
  const doc: IndexDocument = {
    format: PUBLICATION_FORMAT,
    scope: snapshot.scope,
    version: snapshot.version,
    files: snapshot.files.map((f) => ({ path: f.path, size: f.size, mtimeMs: f.mtimeMs, sha256: f.sha256 })),
  };
  return Buffer.from(JSON.stringify(doc), 'utf8');
}

/**
 * Validates an index read from `indexKey(scope, version)`: every path a
 * valid pack path, sorted without duplicates, every size within
 * `maxFileSize`, every sha256 well-formed, and the files hashing to the
 * version the key names. Any problem refuses the whole index.
 */
export function parseIndex(bytes: Buffer, scope: ScopeName, version: string, maxFileSize: number): ScopeSnapshot {
  const key = indexKey(scope, version);
  const value = parseJson(bytes, key);
  if (!isObject(value) || value['format'] !== PUBLICATION_FORMAT) throw new PublicationError(key, `expected an index of format ${PUBLICATION_FORMAT}`);
  if (value['scope'] !== scope || value['version'] !== version) throw new PublicationError(key, `names scope ${JSON.stringify(value['scope'])} version ${JSON.stringify(value['version'])}, not the ones its key names`);
  const raw = value['files'];
  if (!Array.isArray(raw)) throw new PublicationError(key, '"files" must be an array');
  const files: PlanFile[] = [];
  let totalBytes = 0;
  let previous: string | null = null;
  for (let i = 0; i < raw.length; i++) {
    const f: unknown = raw[i];
    const at = `files[${i}]`;
    if (!isObject(f)) throw new PublicationError(key, `${at}: expected {path, size, mtimeMs, sha256}`);
    const { path, size, mtimeMs, sha256 } = f;
    if (typeof path !== 'string') throw new PublicationError(key, `${at}.path: expected a string`);
    const problem = packPathProblem(path);
    if (problem !== null) throw new PublicationError(key, `${at}.path ${JSON.stringify(path.slice(0, 200))}: ${problem}`);
    if (previous !== null && comparePaths(previous, path) >= 0) throw new PublicationError(key, `${at}.path ${JSON.stringify(path)}: not sorted after ${JSON.stringify(previous)} (or a duplicate)`);
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw new PublicationError(key, `${at}.size: expected a byte count`);
    if (size > maxFileSize) throw new PublicationError(key, `${at}.size: ${size} bytes is above --max-file-size (${maxFileSize})`);
    if (typeof mtimeMs !== 'number' || !Number.isFinite(mtimeMs)) throw new PublicationError(key, `${at}.mtimeMs: expected a number`);
    if (!isSha256(sha256)) throw new PublicationError(key, `${at}.sha256: expected 64 lowercase hex digits`);
    files.push({ path, size, mtimeMs, sha256 });
    totalBytes += size;
    previous = path;
  }
  if (scopeVersion(files) !== version) throw new PublicationError(key, 'its files do not hash to the version it is named by');
  return { scope, version, totalBytes, files };
}
