// A scope's files read by index, whatever form the plan sent them in (rows,
// columns, packed), and the survey one pass over them gives: what a mount
// shows of a scope before its nodes exist (core/tree/pending-scope.ts). The
// survey is a pass of its own (surveyFiles) or rides along another pass
// over the same paths (FileSurveyor): the daemon's check of a packed plan
// makes each path once and surveys it there, so a 100 000-file plan is not
// cut into strings twice before the mount is ready.

/** A scope's files read by index, whichever form they came in: passes over every file need no object per file. */
export interface FileTable {
  readonly length: number;
  path(i: number): string;
  size(i: number): number;
  mtimeMs(i: number): number;
  sha256(i: number): string;
  /** The survey of these files, when whoever made the table ran it on the way (it must be surveyFiles' answer). */
  readonly survey?: ScopeSurvey | undefined;
}

/** What one pass over a scope's files finds, keeping the files NodeBuilder would keep. */
export interface ScopeSurvey {
  readonly fileCount: number;
  readonly totalBytes: number;
  /** -Infinity for a scope with no files. */
  readonly newestMtimeMs: number;
  /** Directories directly in the scope's directory. */
  readonly subdirs: number;
  /** Indexes of files a clash drops (the same path twice, a path below a file); undefined when none. */
  readonly dropped: ReadonlySet<number> | undefined;
}

const SLASH = 0x2f;

/**
 * The pass, one file at a time in the table's order. It ends (`add` says
 * false, `survey` is undefined) when the files are not sorted by path or a
 * path is not plain (empty, a leading or trailing `/`, `//`): such a scope
 * is built at once, where NodeBuilder's own checks apply as they come.
 */
export class FileSurveyor {
  private fileCount = 0;
  private totalBytes = 0;
  private newestMtimeMs = -Infinity;
  private subdirs = 0;
  private dropped: Set<number> | undefined;
  // Kept files, each a prefix of the next: in sorted order these are the only ones a later path can be below.
  private readonly chain: string[] = [];
  private previous: string | undefined;
  private lastTop = '';
  private ended = false;

  add(i: number, path: string, size: number, mtimeMs: number): boolean {
    const { previous, chain } = this;
    if (previous !== undefined && path <= previous) {
      if (path < previous) return this.end();
      (this.dropped ??= new Set()).add(i); // the same path again: the first wins
      return true;
    }
    this.previous = path;
    if (path.length === 0 || path.charCodeAt(0) === SLASH || path.charCodeAt(path.length - 1) === SLASH || path.includes('//')) return this.end();
    while (chain.length > 0 && !path.startsWith(chain[chain.length - 1] as string)) chain.pop();
    const holder = chain[chain.length - 1];
    if (holder !== undefined && path.charCodeAt(holder.length) === SLASH) {
      (this.dropped ??= new Set()).add(i); // below a file: the file came first and wins
      return true;
    }
    chain.push(path);
    this.fileCount++;
    this.totalBytes += size;
    if (mtimeMs > this.newestMtimeMs) this.newestMtimeMs = mtimeMs;
    // Files below one top-level directory are contiguous in sorted order: count each once.
    const slash = path.indexOf('/');
    const lastTop = this.lastTop;
    if (slash !== -1 && !(lastTop.length === slash + 1 && path.startsWith(lastTop))) {
      this.lastTop = path.slice(0, slash + 1);
      this.subdirs++;
    }
    return true;
  }

  /** What the pass found, or undefined when it ended early. */
  get survey(): ScopeSurvey | undefined {
    if (this.ended) return undefined;
    const { fileCount, totalBytes, newestMtimeMs, subdirs, dropped } = this;
    return { fileCount, totalBytes, newestMtimeMs, subdirs, dropped };
  }

  private end(): false {
    this.ended = true;
    return false;
  }
}

/** The pass over a whole table (FileSurveyor), or undefined when it ends early. */
export function surveyFiles(files: FileTable): ScopeSurvey | undefined {
  const surveyor = new FileSurveyor();
  for (let i = 0; i < files.length; i++) {
    if (!surveyor.add(i, files.path(i), files.size(i), files.mtimeMs(i))) return undefined;
  }
  return surveyor.survey;
}
