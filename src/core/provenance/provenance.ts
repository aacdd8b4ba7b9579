// Provenance: where a file's bytes came from, recorded beside them and never
// inside their hash. A scope's version hashes paths and sha256s only, so the
// same bytes keep the same version whatever is said about them; provenance
// has a version of its own (`version` below), which is what tells a mount
// that only the record changed (a commit of bytes already served).
//
// Per scope it travels as one small table: the distinct records (when the
// bytes were published or first scanned, the knowledgefs release that
// recorded it and, when the data directory is a git work tree, the commit
// that last changed the file and that commit's time) and runs over the
// scope's files in their order (record index, file count). 100 000 files
// recorded in one scan from a handful of commits cost a few records, not
// 100 000. A source URL is an operator's template (source-url.ts), kept once
// per scope with the scope directory's path in the repository, and expanded
// per file where it is asked for.
//
// Never a person's identity: there is no author or committer field, and
// nothing here takes one.

import { createHash } from 'node:crypto';
import { checkSourceTemplate, expandSourceUrl, type SourceTemplate } from './source-url.js';

export type { SourceTemplate } from './source-url.js';

/** What is known of how one file's bytes got here. */
export interface ProvenanceRecord {
  /** When these bytes were first published (`publish`) or first scanned (`serve --data`), ISO 8601 UTC. */
  readonly publishedAt: string;
  /** The knowledgefs release that recorded it, e.g. `0.1.0`. */
  readonly knowledgefsVersion: string;
  /** The commit that last changed the file, when the data directory is a git work tree and the bytes are the ones committed. */
  readonly commit?: string;
  /** That commit's time (committer date), ISO 8601 UTC. */
  readonly committedAt?: string;
}

/** A scope's provenance, as plans, indexes and publications carry it. */
export interface ScopeProvenance {
  /** sha256 over records, runs and source: changes whenever any of them does. */
  readonly version: string;
  readonly records: readonly ProvenanceRecord[];
  /** Pairs (record index, file count) over the scope's files in path order; the counts sum to its file count. */
  readonly runs: readonly number[];
  readonly source?: SourceTemplate;
}

/** One file's provenance, as the read tool, the client library and MCP answer it. */
export interface FileProvenance {
  readonly publishedAt: string;
  readonly knowledgefsVersion: string;
  readonly commit: string | null;
  readonly committedAt: string | null;
  readonly source: string | null;
}

/** Most records one scope may carry (at most one per file anyway). */
export const MAX_PROVENANCE_RECORDS = 1_000_000;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
const COMMIT = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const RELEASE = /^[0-9A-Za-z.+-]{1,64}$/;

/** A record with its keys in one order (the digest hashes its JSON). */
export function provenanceRecord(fields: ProvenanceRecord): ProvenanceRecord {
  return {
    publishedAt: fields.publishedAt,
    knowledgefsVersion: fields.knowledgefsVersion,
    ...(fields.commit !== undefined ? { commit: fields.commit } : {}),
    ...(fields.committedAt !== undefined ? { committedAt: fields.committedAt } : {}),
  };
}

function digest(records: readonly ProvenanceRecord[], runs: readonly number[], source: SourceTemplate | undefined): string {
  const src = source === undefined ? null : { template: source.template, prefix: source.prefix };
  return createHash('sha256').update(JSON.stringify([records, runs, src])).digest('hex');
}

/** The table for files whose records are `perFile` (in the scope's file order). */
export function buildScopeProvenance(perFile: readonly ProvenanceRecord[], source?: SourceTemplate): ScopeProvenance {
  const records: ProvenanceRecord[] = [];
  const indexOf = new Map<string, number>();
  const runs: number[] = [];
  let lastKey: string | undefined;
  for (const r of perFile) {
    const record = provenanceRecord(r);
    const key = JSON.stringify(record);
    if (key === lastKey) {
      runs[runs.length - 1] = (runs[runs.length - 1] as number) + 1;
      continue;
    }
    lastKey = key;
    let at = indexOf.get(key);
    if (at === undefined) {
      at = records.length;
      records.push(record);
      indexOf.set(key, at);
    }
    runs.push(at, 1);
  }
  return { version: digest(records, runs, source), records, runs, ...(source !== undefined ? { source } : {}) };
}

/** The same table with another source template (its digest follows). */
export function withSource(p: ScopeProvenance, source: SourceTemplate | undefined): ScopeProvenance {
  return { version: digest(p.records, p.runs, source), records: p.records, runs: p.runs, ...(source !== undefined ? { source } : {}) };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseRecord(v: unknown): ProvenanceRecord | string {
  if (!isObject(v)) return 'a record is not an object';
  const { publishedAt, knowledgefsVersion, commit, committedAt } = v;
  if (typeof publishedAt !== 'string' || !TIME.test(publishedAt)) return 'a record\'s "publishedAt" is not an ISO 8601 time';
  if (typeof knowledgefsVersion !== 'string' || !RELEASE.test(knowledgefsVersion)) return 'a record\'s "knowledgefsVersion" is not a release';
  if (commit !== undefined && (typeof commit !== 'string' || !COMMIT.test(commit))) return 'a record\'s "commit" is not a commit id (40 or 64 hex digits)';
  if (committedAt !== undefined && (typeof committedAt !== 'string' || !TIME.test(committedAt))) return 'a record\'s "committedAt" is not an ISO 8601 time';
  return provenanceRecord({ publishedAt, knowledgefsVersion, ...(commit !== undefined ? { commit } : {}), ...(committedAt !== undefined ? { committedAt } : {}) });
}

/** How many files a table's runs cover. */
export function provenanceFileCount(p: ScopeProvenance): number {
  let files = 0;
  for (let i = 1; i < p.runs.length; i += 2) files += p.runs[i] as number;
  return files;
}

/**
 * A scope's provenance as received (a plan, a publication's provenance
 * object), checked whole: every record well-formed, runs covering exactly
 * `fileCount` files (any number when undefined: a plan's stub, checked
 * against the files held) with records that exist, a source template this
 * release can expand, and the digest its version claims. A string says what
 * is wrong.
 */
export function parseScopeProvenance(v: unknown, fileCount: number | undefined): ScopeProvenance | string {
  if (!isObject(v)) return 'not an object';
  const { version, records, runs, source } = v;
  if (typeof version !== 'string') return '"version" is not a string';
  if (!Array.isArray(records) || records.length > MAX_PROVENANCE_RECORDS) return '"records" is not a list of records';
  if (!Array.isArray(runs) || runs.length % 2 !== 0) return '"runs" is not a list of (record, count) pairs';
  const parsed: ProvenanceRecord[] = [];
  for (const r of records) {
    const record = parseRecord(r);
    if (typeof record === 'string') return record;
    parsed.push(record);
  }
  let files = 0;
  for (let i = 0; i < runs.length; i += 2) {
    const at: unknown = runs[i];
    const count: unknown = runs[i + 1];
    if (!Number.isSafeInteger(at) || (at as number) < 0 || (at as number) >= parsed.length) return '"runs" names a record that does not exist';
    if (!Number.isSafeInteger(count) || (count as number) < 1) return '"runs" has a count that is not a positive integer';
    files += count as number;
  }
  if (fileCount !== undefined && files !== fileCount) return `"runs" cover ${files} files, the scope has ${fileCount}`;
  let template: SourceTemplate | undefined;
  if (source !== undefined) {
    if (!isObject(source) || typeof source.template !== 'string' || typeof source.prefix !== 'string') return '"source" is not {template, prefix}';
    const problem = checkSourceTemplate(source.template);
    if (problem !== null) return `"source": ${problem}`;
    if (source.prefix.length > 4096 || /[\0-\x1f\x7f]/.test(source.prefix)) return '"source" has a prefix that is not a path';
    template = { template: source.template, prefix: source.prefix };
  }
  const checked = runs as number[];
  if (digest(parsed, checked, template) !== version) return 'its version does not match its records';
  return { version, records: parsed, runs: checked, ...(template !== undefined ? { source: template } : {}) };
}

/** Where each run starts (file index), for a binary search by index; made once per table. */
const starts = new WeakMap<ScopeProvenance, Uint32Array>();

function runStarts(p: ScopeProvenance): Uint32Array {
  let s = starts.get(p);
  if (s === undefined) {
    s = new Uint32Array(p.runs.length / 2);
    let at = 0;
    for (let r = 0; r < s.length; r++) {
      s[r] = at;
      at += p.runs[2 * r + 1] as number;
    }
    starts.set(p, s);
  }
  return s;
}

/** The record of the file at `index` in the scope's file order, or undefined past the end. */
export function recordAt(p: ScopeProvenance, index: number): ProvenanceRecord | undefined {
  const s = runStarts(p);
  let lo = 0;
  let hi = s.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((s[mid] as number) <= index) lo = mid;
    else hi = mid - 1;
  }
  if (s.length === 0 || index < 0 || index >= (s[lo] as number) + (p.runs[2 * lo + 1] as number)) return undefined;
  return p.records[p.runs[2 * lo] as number];
}

/** A file's provenance as clients see it: its record, and its source URL expanded from the scope's template. */
export function fileProvenance(record: ProvenanceRecord, p: ScopeProvenance, scope: string, filePath: string): FileProvenance {
  return {
    publishedAt: record.publishedAt,
    knowledgefsVersion: record.knowledgefsVersion,
    commit: record.commit ?? null,
    committedAt: record.committedAt ?? null,
    source: p.source === undefined ? null : expandSourceUrl(p.source, { commit: record.commit, scope, file: filePath }),
  };
}

/** The provenance of a whole plan: a digest over each scope's (name, provenance version); undefined when no scope has any. */
export function planProvenanceVersion(scopes: readonly { readonly scope: string; readonly provenance?: ScopeProvenance | undefined }[]): string | undefined {
  if (!scopes.some((s) => s.provenance !== undefined)) return undefined;
  const hash = createHash('sha256');
  for (const s of scopes) hash.update(`${s.scope}\0${s.provenance?.version ?? ''}\n`);
  return hash.digest('hex');
}

/** Hex digits of the plan's provenance digest its ETag carries. */
export const PROVENANCE_TAG_DIGITS = 16;

/**
 * A plan's ETag: its version, and for a client that takes provenance the
 * start of the plan's provenance digest, so a change of provenance alone
 * (a commit of bytes already served) ends a long-poll too. A client that
 * does not ask for provenance keeps the version alone, as before.
 */
export function planTag(version: string, provenanceVersion: string | undefined): string {
  return provenanceVersion === undefined ? version : `${version}+${provenanceVersion.slice(0, PROVENANCE_TAG_DIGITS)}`;
}
