// Decides when the data directory is rescanned, and runs one scan at a time.
//
// Three sources of work, merged into one pending ScanWork:
// - a change noticed by the watch: rescanned DEBOUNCE_MS later (events of
//   one write-then-rename, or of a copied tree, fall into one scan; later
//   events do not push it back, so a steady stream of writes still gets
//   scanned);
// - the periodic full rescan, `fullIntervalMs()` after the last full scan
//   ended (long while the watch works, short when it does not);
// - `now()`: a full rescan at once (tests, and start-up of the watch).
// Scans never overlap, and apart from `now()` the next one starts at least
// twice the last one's duration after it ended, so a very large tree never
// keeps the scanner busy more than a third of the time.

import { fullWork, mergeWork, type ScanWork } from './data-watch.js';

/** Wait after a noticed change before rescanning it. */
export const DEBOUNCE_MS = 50;

export interface RescanLoopOptions {
  readonly scan: (work: ScanWork) => Promise<void>;
  /** Pause between full rescans (read again after every full scan). */
  readonly fullIntervalMs: () => number;
  readonly debounceMs?: number;
}

export class RescanLoop {
  private pending: ScanWork | null = null;
  private waiters: (() => void)[] = [];
  private urgent = false;
  private timer: NodeJS.Timeout | null = null;
  private timerDue = Infinity;
  private fullTimer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastEnd = 0;
  private lastMs = 0;
  private closed = false;

  constructor(private readonly options: RescanLoopOptions) {
    this.scheduleFull();
  }

  /** Rescans `work` soon (DEBOUNCE_MS), together with anything already pending. */
  notice(work: ScanWork): void {
    this.add(work);
    this.kick(this.options.debounceMs ?? DEBOUNCE_MS);
  }

  /** A full rescan now; resolves once a scan that started after this call has ended. */
  now(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.waiters.push(resolve));
    this.add(fullWork());
    this.urgent = true;
    this.kick(0);
    return done;
  }

  /** The full-rescan interval changed (the watch failed): the next full rescan follows the new one. */
  retime(): void {
    this.scheduleFull();
  }

  /** Stops scheduling; resolves when the running scan (if any) has ended. */
  async close(): Promise<void> {
    this.closed = true;
    // No timer may outlive close(): one left would keep the process from exiting.
    clearTimeout(this.timer ?? undefined);
    clearTimeout(this.fullTimer ?? undefined);
    await this.running;
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private add(work: ScanWork): void {
    if (this.pending === null) this.pending = work;
    else mergeWork(this.pending, work);
  }

  private scheduleFull(): void {
    if (this.closed) return;
    clearTimeout(this.fullTimer ?? undefined);
    this.fullTimer = setTimeout(() => {
      this.fullTimer = null;
      this.add(fullWork());
      this.kick(0);
    }, this.options.fullIntervalMs());
  }

  /** Starts the pending work after `delayMs` (or sooner if already due sooner); a running scan picks it up when it ends. */
  private kick(delayMs: number): void {
    if (this.closed || this.running !== null || this.pending === null) return;
    const now = performance.now();
    const due = this.urgent ? now : Math.max(now + delayMs, this.lastEnd + 2 * this.lastMs);
    // timerDue is Infinity while no timer is set.
    // Stryker disable next-line EqualityOperator: a timer set again for the same time is the same timer
    if (this.timerDue <= due) return;
    // The timer it replaces must not fire: it would start a scan while this one runs.
    clearTimeout(this.timer ?? undefined);
    this.timerDue = due;
    this.timer = setTimeout(() => this.run(), Math.max(0, due - performance.now()));
  }

  private run(): void {
    this.timer = null;
    this.timerDue = Infinity;
    const work = this.pending;
    // Stryker disable next-line ConditionalExpression,LogicalOperator: never true (a timer is set only with work pending, and close() clears it); it narrows the type
    if (this.closed || work === null) return;
    const waiters = this.waiters.splice(0);
    this.pending = null;
    this.urgent = false;
    const started = performance.now();
    this.running = this.options.scan(work).finally(() => {
      this.lastEnd = performance.now();
      this.lastMs = this.lastEnd - started;
      this.running = null;
      for (const resolve of waiters) resolve();
      if (work.full) this.scheduleFull();
      this.kick(this.options.debounceMs ?? DEBOUNCE_MS);
    });
  }
}
