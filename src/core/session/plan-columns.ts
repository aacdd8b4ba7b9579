// The columnar form of a plan's file list (GET /v1/plan?form=columns): one
// array per field instead of one object per file. At 100 000 files the rows
// are 100 000 objects of four keys each, and their boxed mtimes, for the
// daemon to parse, check and keep; the columns are half the tokens (no
// keys), their numbers land in flat arrays, and no object per file exists
// until something needs one (ColumnarSnapshot). The scope's version is the
// same hash in both forms, and the daemon reads either: a control plane that
// does not know the parameter answers rows.

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

function rowsOf(c: FileColumns): PlanFile[] {
  const files: PlanFile[] = new Array(c.paths.length);
  for (let i = 0; i < files.length; i++) {
    files[i] = { path: c.paths[i] as string, size: c.sizes[i] as number, mtimeMs: c.mtimesMs[i] as number, sha256: c.sha256s[i] as string };
  }
  return files;
}

/** A snapshot that came as columns: its `files` are built on first read, so a scope nothing asks about never costs an object per file. */
export class ColumnarSnapshot implements ScopeSnapshot {
  #files: readonly PlanFile[] | undefined;

  constructor(
    readonly scope: ScopeName,
    readonly version: string,
    readonly totalBytes: number,
    readonly columns: FileColumns,
  ) {}

  get files(): readonly PlanFile[] {
    return (this.#files ??= rowsOf(this.columns));
  }
}

/** A scope's files read by index, whichever form they came in: passes over every file need no object per file. */
export interface FileTable {
  readonly length: number;
  path(i: number): string;
  size(i: number): number;
  mtimeMs(i: number): number;
  sha256(i: number): string;
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

class ColumnTable implements FileTable {
  constructor(private readonly c: FileColumns) {}
  get length(): number {
    return this.c.paths.length;
  }
  path(i: number): string {
    return this.c.paths[i] as string;
  }
  size(i: number): number {
    return this.c.sizes[i] as number;
  }
  mtimeMs(i: number): number {
    return this.c.mtimesMs[i] as number;
  }
  sha256(i: number): string {
    return this.c.sha256s[i] as string;
  }
}

export function fileTable(snapshot: ScopeSnapshot): FileTable {
  return snapshot instanceof ColumnarSnapshot ? new ColumnTable(snapshot.columns) : new RowTable(snapshot.files);
}
