// The authorisation bound when the kernel opens files by itself
// (--kernel-opens on: OPEN answered ENOSYS, so the kernel sends no OPEN,
// RELEASE or FLUSH for files again on this connection, and keeps their pages
// across opens). The daemon then never sees an open; what it still sees is
// the path walk: a LOOKUP (or a READDIRPLUS entry) hands the kernel an entry,
// and an open can only reach a file through an entry the kernel holds. So the
// bound moves to the entries:
// - an entry of a file is handed out only while its scope's grant is fresh,
//   and never valid past that grant's deadline (`entrySec`): once it passes,
//   the kernel asks again (LOOKUP) before the next open, and that lookup waits
//   for a fresh grant;
// - a scope the kernel holds entries of has its grant asked for again at half
//   its life, so those lookups find a fresh grant and never wait;
// - when a grant lapses unrenewed, is refused or dropped (revocation), the
//   scope's entries are invalidated at once (`lapsed`), so nothing the kernel
//   holds outlives the grant by more than the time the message takes.
// Clock injected: tests need no sleeps for the arithmetic.

/**
 * A held scope's grant is asked for again once this share of its life has
 * passed: the other half covers a control plane slow to answer under load
 * (the same share as the addon's fast path, native-fast-path.ts).
 */
const RENEW_AT = 0.5;

export interface KernelGrantBoundDeps {
  /** Ask for `scope`'s grant again, in the background (GrantCache.renew). */
  readonly renew: (scope: string) => void;
  /** True while the kernel holds an entry of a file of `scope`. */
  readonly holdsScope: (scope: string) => boolean;
  /** `scope` has no fresh grant any more: drop every entry of it the kernel holds. */
  readonly lapsed: (scope: string) => void;
  readonly clock?: () => number;
}

export class KernelGrantBound {
  /** Per scope: the deadline of its current grant (a clock time). */
  private readonly deadlines = new Map<string, number>();
  private readonly renewals = new Map<string, NodeJS.Timeout>();
  private readonly lapses = new Map<string, NodeJS.Timeout>();
  private readonly clock: () => number;
  private ended = false;

  constructor(private readonly deps: KernelGrantBoundDeps) {
    this.clock = deps.clock ?? Date.now;
  }

  /** The core's deadline for `scope` moved (`untilMs` a clock time, 0 = none any more). */
  grantChanged(scope: string, untilMs: number): void {
    this.clearTimers(scope);
    if (this.ended) return;
    const life = untilMs - this.clock();
    if (untilMs === 0 || life <= 0) {
      const had = this.deadlines.delete(scope);
      if (had || untilMs === 0) this.deps.lapsed(scope);
      return;
    }
    this.deadlines.set(scope, untilMs);
    const renew = setTimeout(() => {
      this.renewals.delete(scope);
      if (this.deps.holdsScope(scope)) this.deps.renew(scope);
    }, life * RENEW_AT);
    const lapse = setTimeout(() => {
      this.lapses.delete(scope);
      if (this.deadlines.get(scope) !== untilMs) return;
      this.deadlines.delete(scope);
      this.deps.lapsed(scope);
    }, life);
    renew.unref();
    lapse.unref();
    this.renewals.set(scope, renew);
    this.lapses.set(scope, lapse);
  }

  /** True while `scope` has a grant whose deadline has not passed. */
  isFresh(scope: string): boolean {
    return (this.deadlines.get(scope) ?? 0) > this.clock();
  }

  /**
   * How long the kernel may keep an entry of a file of `scope` (seconds):
   * at most `capSec`, and never past the grant's deadline; 0 without a fresh
   * grant (the kernel asks again at its next use).
   */
  entrySec(scope: string, capSec: number): number {
    const left = ((this.deadlines.get(scope) ?? 0) - this.clock()) / 1000;
    return left <= 0 ? 0 : Math.min(capSec, left);
  }

  /** The kernel closed the session: no more renewals or invalidations. */
  end(): void {
    this.ended = true;
    for (const scope of [...this.deadlines.keys()]) this.clearTimers(scope);
    this.deadlines.clear();
  }

  private clearTimers(scope: string): void {
    clearTimeout(this.renewals.get(scope));
    clearTimeout(this.lapses.get(scope));
    this.renewals.delete(scope);
    this.lapses.delete(scope);
  }
}
