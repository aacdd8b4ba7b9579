// The columnar form of a plan's file list (GET /v1/plan?form=columns): one
// array per field instead of one object per file. At 100 000 files the rows
// are 100 000 objects of four keys each, and their boxed mtimes, for the
// daemon to parse, check and keep; the columns are half the tokens (no
// keys), their numbers land in flat arrays, and no object per file exists
// until something needs one (ColumnarSnapshot, which holds the packed form's
// files too: plan-packed.ts). The scope's version is the same hash in every
// form, and the daemon reads each: a control plane that does not know the
// parameter answers rows.

import type { FileTable } from './file-table.js';
import type { PlanFile, ScopeSnapshot } from './plan.js';
import type { ScopeName } from '../scope.js';

/** The `form` query parameter's value that asks for columns. */
export const PLAN_FORM_COLUMNS = 'columns';

/** The files of one scope, column by column, in the rows' order. */
export interface FileColumns {
  readonly paths: readonly string[];
  readonly sizes: readonly number[];
  readonly mtimesMs: readonly number[];
  readonly sha256s: readonly string[];
}

/** A scope in the columnar form, as the wire carries it. */
export interface ColumnarScope extends Omit<ScopeSnapshot, 'files'> {
  readonly columns: FileColumns;
}

export function toColumns(files: readonly PlanFile[]): FileColumns {
  const n = files.length;
  // Stryker disable ArrayDeclaration: sized up front for speed; an empty array grows to the same values
  const paths: string[] = new Array(n);
  const sizes: number[] = new Array(n);
  const mtimesMs: number[] = new Array(n);
  const sha256s: string[] = new Array(n);
  // Stryker restore ArrayDeclaration
  for (let i = 0; i < n; i++) {
    const f = files[i] as PlanFile;
    paths[i] = f.path;
    sizes[i] = f.size;
    mtimesMs[i] = f.mtimeMs;
    sha256s[i] = f.sha256;
  }
  return { paths, sizes, mtimesMs, sha256s };
}

export function columnarScope(snapshot: ScopeSnapshot): ColumnarScope {
  return { scope: snapshot.scope, version: snapshot.version, totalBytes: snapshot.totalBytes, columns: toColumns(snapshot.files) };
}

function rowsOf(t: FileTable): PlanFile[] {
  const files: PlanFile[] = new Array(t.length);
  for (let i = 0; i < files.length; i++) files[i] = { path: t.path(i), size: t.size(i), mtimeMs: t.mtimeMs(i), sha256: t.sha256(i) };
  return files;
}

/**
 * A snapshot whose files came as columns or packed (plan-packed.ts): read
 * by index through its table, and made into rows only if something reads
 * `files`, so a scope nothing asks about never costs an object per file.
 */
export class ColumnarSnapshot implements ScopeSnapshot {
  #files: readonly PlanFile[] | undefined;

  constructor(
    readonly scope: ScopeName,
    readonly version: string,
    readonly totalBytes: number,
    readonly table: FileTable,
  ) {}

  get files(): readonly PlanFile[] {
    return (this.#files ??= rowsOf(this.table));
  }
}

class RowTable implements FileTable {
  constructor(private readonly files: readonly PlanFile[]) {}
  get length(): number {
    return this.files.length;
  }
  path(i: number): string {
    return (this.files[i] as PlanFile).path;
  }
  size(i: number): number {
    return (this.files[i] as PlanFile).size;
  }
  mtimeMs(i: number): number {
    return (this.files[i] as PlanFile).mtimeMs;
  }
  sha256(i: number): string {
    return (this.files[i] as PlanFile).sha256;
  }
}

/** The columnar form's arrays as a table. */
export class ColumnTable implements FileTable {
  constructor(readonly columns: FileColumns) {}
  get length(): number {
    return this.columns.paths.length;
  }
  path(i: number): string {
    return this.columns.paths[i] as string;
  }
  size(i: number): number {
    return this.columns.sizes[i] as number;
  }
  mtimeMs(i: number): number {
    return this.columns.mtimesMs[i] as number;
  }
  sha256(i: number): string {
    return this.columns.sha256s[i] as string;
  }
}

export function fileTable(snapshot: ScopeSnapshot): FileTable {
  return snapshot instanceof ColumnarSnapshot ? snapshot.table : new RowTable(snapshot.files);
}
