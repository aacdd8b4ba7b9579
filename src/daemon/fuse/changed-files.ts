// Files whose content changed recently, for a FUSE binding that gives every
// version of a path one kernel inode (fuse-native: libfuse2's high-level,
// path-based API). All versions of a path then share one page cache, and
// the kernel keeps it across an open (auto_cache) unless libfuse sees a new
// size or mtime. libfuse refreshes the attributes it compares at an open only
// when its copy is older than the attribute timeout, so an open within that
// long of a change may keep the old version's pages, and the new handle
// would then fill the rest of the file with new bytes: a mix.
//
// The rule that keeps every new open on one version, whole:
//   - an open of a path changed less than (attribute timeout + margin) ago
//     waits out the remainder (`waitMs`), so libfuse compares fresh
//     attributes and drops the old pages;
//   - a descriptor opened before the change never brings old bytes back
//     into the shared cache: once the tree holds another version of its
//     path, a read that reaches the daemon fails with ESTALE
//     (filesystem.ts).
// A binding that gives each version its own node id has a page cache per
// version and needs neither.

/** Added to the attribute timeout: libfuse's clock and ours are read at slightly different moments. */
export const CHANGE_MARGIN_MS = 100;

export class ChangedFiles {
  /** Path → when its change became visible (monotonic ms). Pruned as entries age out. */
  private readonly changedAt = new Map<string, number>();

  /**
   * @param windowMs how long after a change an open must wait for
   *   (attribute timeout + CHANGE_MARGIN_MS)
   */
  constructor(
    readonly windowMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Records that `paths` now hold new content (called at each tree swap). */
  record(paths: readonly string[]): void {
    const at = this.now();
    this.prune(at);
    for (const path of paths) {
      this.changedAt.delete(path); // re-inserted last, so the map stays ordered by time
      this.changedAt.set(path, at);
    }
  }

  /** How long an open of `path` must wait now (0: not changed recently). */
  waitMs(path: string): number {
    const at = this.changedAt.get(path);
    if (at === undefined) return 0;
    const left = at + this.windowMs - this.now();
    if (left > 0) return left;
    this.changedAt.delete(path);
    return 0;
  }

  size(): number {
    return this.changedAt.size;
  }

  /** Drops entries older than the window; the map is in time order, so it stops at the first young one. */
  private prune(now: number): void {
    for (const [path, at] of this.changedAt) {
      if (at + this.windowMs > now) break;
      this.changedAt.delete(path);
    }
  }
}
