// Helpers that keep data-dir scans cheap and the event loop responsive.
//
// Scans use synchronous readdir/lstat/read (one promise per file costs more
// than the syscall itself at 100 000 files) in slices of at most SLICE_MS,
// yielding to the event loop between slices so requests keep being served.
// A file is re-hashed only when its fingerprint (inode, size, mtime, ctime)
// changed since it was last hashed.

/** Longest stretch of synchronous scanning before yielding to the event loop. */
export const SLICE_MS = 8;

export interface Slicer {
  /** True when the current slice has used its time. */
  due(): boolean;
  /** Lets the event loop run, then starts a new slice. */
  yield(): Promise<void>;
}

export function createSlicer(sliceMs = SLICE_MS, now: () => number = () => performance.now()): Slicer {
  let start = now();
  return {
    due: () => now() - start >= sliceMs,
    yield: async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      start = now();
    },
  };
}

/** What a rescan compares to decide a file is unchanged and need not be re-hashed. */
export interface Fingerprint {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
}

export function sameFingerprint(a: Fingerprint, b: Fingerprint): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;
}

/** Copies the four fields out of a Stats object (so the Stats can be collected). */
export function fingerprint(st: Fingerprint): Fingerprint {
  return { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
}
