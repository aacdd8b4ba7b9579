// The plan: what a session's mount materialises. The control plane builds it;
// the daemon turns it into its in-memory tree and never asks anything else
// for metadata.
//
// Materialised set: when every scope the session may load fits in the
// prefetch threshold, all of them; otherwise account + bound team + mounted
// teams. A scope never enters a plan unless CanLoadScope allowed it.

import { createHash } from 'node:crypto';
import { ACCOUNT_SCOPE, compareScopes, teamScope, type ScopeName } from '../scope.js';

export interface PlanFile {
  /** Path inside the scope, `/`-separated, no leading slash. */
  readonly path: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly sha256: string;
}

export interface ScopeSnapshot {
  readonly scope: ScopeName;
  /** sha256 over the sorted (path, sha256) list: changes iff any file does. */
  readonly version: string;
  readonly totalBytes: number;
  /** Sorted by path. */
  readonly files: readonly PlanFile[];
}

export type PlanMode = 'all-loadable' | 'bound-and-mounted';

export interface Plan {
  readonly sessionId: string;
  /** sha256 over mode and each scope's (name, version): the plan's ETag. */
  readonly version: string;
  readonly threshold: number;
  readonly mode: PlanMode;
  /** Teams the session has mounted through the read tool, in mount order. */
  readonly mounted: readonly string[];
  readonly scopes: readonly ScopeSnapshot[];
}

export function comparePaths(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortedByPath<T extends Pick<PlanFile, 'path'>>(files: readonly T[]): readonly T[] {
  for (let i = 1; i < files.length; i++) {
    if (comparePaths((files[i - 1] as T).path, (files[i] as T).path) > 0) return [...files].sort((x, y) => comparePaths(x.path, y.path));
  }
  return files;
}

/** Hashed text is handed over in pieces of about this many characters (one update per file costs more than the hashing). */
// Stryker disable next-line ArithmeticOperator: where the text is cut into pieces does not change the digest
const HASH_PIECE = 64 * 1024;

export function scopeVersion(files: readonly Pick<PlanFile, 'path' | 'sha256'>[]): string {
  const sorted = sortedByPath(files);
  return sortedScopeVersion(
    sorted.length,
    (i) => (sorted[i] as PlanFile).path,
    (i) => (sorted[i] as PlanFile).sha256,
  );
}

/** scopeVersion of files already sorted by path, read by index (a plan's columns need no object per file). */
export function sortedScopeVersion(count: number, path: (i: number) => string, sha256: (i: number) => string): string {
  const hash = createHash('sha256');
  let piece = '';
  for (let i = 0; i < count; i++) {
    piece += `${path(i)}\0${sha256(i)}\n`;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: where the text is cut into pieces does not change the digest
    if (piece.length >= HASH_PIECE) {
      hash.update(piece);
      piece = '';
    }
  }
  hash.update(piece); // an empty last piece changes nothing
  return hash.digest('hex');
}

export function snapshotScope(scope: ScopeName, files: readonly PlanFile[]): ScopeSnapshot {
  const sorted = [...files].sort((x, y) => comparePaths(x.path, y.path));
  let totalBytes = 0;
  for (const f of sorted) totalBytes += f.size;
  return { scope, version: scopeVersion(sorted), totalBytes, files: sorted };
}

/** The file at `path` of a scope's snapshot (binary search: a snapshot's files are sorted by path). */
export function findFile(snapshot: ScopeSnapshot | undefined, path: string): PlanFile | undefined {
  if (snapshot === undefined) return undefined;
  const files = snapshot.files;
  let lo = 0;
  let hi = files.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const f = files[mid] as PlanFile;
    if (f.path === path) return f;
    if (f.path < path) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}

export interface PlanInput {
  readonly sessionId: string;
  readonly threshold: number;
  /** Every scope CanLoadScope allows for the session right now. */
  readonly loadable: readonly ScopeSnapshot[];
  readonly boundTeam?: string | undefined;
  readonly mounted: readonly string[];
}

/** Which loadable scopes to materialise; pure so it can be tested exhaustively. */
export function selectScopes(input: PlanInput): { mode: PlanMode; scopes: ScopeSnapshot[] } {
  const total = input.loadable.reduce((sum, s) => sum + s.totalBytes, 0);
  const sorted = [...input.loadable].sort((a, b) => compareScopes(a.scope, b.scope));
  if (total <= input.threshold) return { mode: 'all-loadable', scopes: sorted };
  const keep = new Set<ScopeName>([ACCOUNT_SCOPE]);
  if (input.boundTeam !== undefined) keep.add(teamScope(input.boundTeam));
  for (const team of input.mounted) keep.add(teamScope(team));
  return { mode: 'bound-and-mounted', scopes: sorted.filter((s) => keep.has(s.scope)) };
}

export function planVersion(mode: PlanMode, scopes: readonly Pick<ScopeSnapshot, 'scope' | 'version'>[], mounted: readonly string[]): string {
  const hash = createHash('sha256').update(`${mode}\n`);
  for (const s of scopes) hash.update(`${s.scope}\0${s.version}\n`);
  hash.update(`mounted\0${mounted.join(',')}\n`);
  return hash.digest('hex');
}

export function buildPlan(input: PlanInput): Plan {
  const { mode, scopes } = selectScopes(input);
  return {
    sessionId: input.sessionId,
    version: planVersion(mode, scopes, input.mounted),
    threshold: input.threshold,
    mode,
    mounted: [...input.mounted],
    scopes,
  };
}

// Plan changes: a plan in which each scope the daemon already holds at the
// same version comes as a stub without its files (GET /v1/plan?known=…).
// Everything else (version, mode, mounted, which scopes) is the full plan's,
// computed by the control plane, so ETags and long-polls work unchanged; the
// daemon fills each stub from what it holds, or fetches the full plan.

/** A scope the daemon holds: its name and version. */
export interface KnownScope {
  readonly scope: ScopeName;
  readonly version: string;
}

/** Hex digits of a scope version a request names it by; the stub carries the full version to compare. */
export const KNOWN_VERSION_PREFIX = 16;

export interface UnchangedScope {
  readonly scope: ScopeName;
  readonly version: string;
  readonly totalBytes: number;
  readonly unchanged: true;
}

export interface PlanChanges extends Omit<Plan, 'scopes'> {
  readonly scopes: readonly (ScopeSnapshot | UnchangedScope)[];
}

export function isUnchangedScope(s: ScopeSnapshot | UnchangedScope): s is UnchangedScope {
  return (s as Partial<UnchangedScope>).unchanged === true;
}

/** `known=` of a plan request: `scope:prefix` pairs, comma-separated. */
export function formatKnownScopes(known: readonly KnownScope[]): string {
  return known.map((k) => `${k.scope}:${k.version.slice(0, KNOWN_VERSION_PREFIX)}`).join(',');
}

/**
 * The full plan: each stub filled with the files `held` returns for its
 * (scope, version). Null when one is not held (the daemon's tree changed
 * while the request was out): the caller then asks for the full plan.
 */
export function resolvePlanChanges(
  changes: PlanChanges,
  held: (scope: ScopeName, version: string) => readonly PlanFile[] | undefined,
): Plan | null {
  const scopes: ScopeSnapshot[] = [];
  for (const s of changes.scopes) {
    if (!isUnchangedScope(s)) {
      scopes.push(s);
      continue;
    }
    const files = held(s.scope, s.version);
    if (files === undefined) return null;
    scopes.push({ scope: s.scope, version: s.version, totalBytes: s.totalBytes, files });
  }
  return { ...changes, scopes };
}
