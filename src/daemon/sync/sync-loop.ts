// Keeps the tree equal to the control plane's current plan.
//
// One request at a time: GET /v1/plan with If-None-Match (the version the
// tree was built from) and a long-poll wait of one --sync-interval, so a
// change the control plane knows of comes back at once and an unchanged plan
// costs one request per interval. Requests start at most once per interval.
//
// On errors (control plane down, garbage, timeouts) the loop keeps the last
// tree, backs off (interval doubling up to MAX_BACKOFF_MS) and keeps going:
// it never throws out of the loop. A 401 means the session is gone: the tree
// is emptied (fail closed).
//
// `refreshNow()` fetches the plan out of band (after a read mounted a team,
// or an open was denied). The client given here may fetch only the scopes
// that changed (plan-changes.ts); what it returns is always a whole plan. Each fetch takes a sequence number when it
// starts; a reply older than the last applied one is dropped, so two fetches
// racing can never roll the tree back.

import { isKnowledgeError } from '../../core/errors.js';
import type { Plan } from '../../core/session/plan.js';
import type { ControlClient } from '../control-plane/control-client.js';
import { abortableSleep } from '../abortable-sleep.js';

export const MAX_BACKOFF_MS = 10_000;

export interface SyncLoopOptions {
  readonly client: Pick<ControlClient, 'plan'>;
  readonly threshold: number;
  readonly intervalMs: number;
  /** The version of the tree now in use ('' to force a full plan). */
  readonly currentVersion: () => string;
  readonly apply: (plan: Plan) => void;
  /** The session was revoked (401): empty the tree. */
  readonly revoked: (message: string) => void;
  readonly log: (line: string) => void;
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

export class SyncLoop {
  private readonly stopper = new AbortController();
  private running: Promise<void> | undefined;
  private seq = 0;
  private appliedSeq = 0;
  private failing = false;
  /** Wakes the loop early (refreshNow). */
  private wake = new AbortController();
  syncs = 0;
  errors = 0;
  /** When the control plane last confirmed the tree is current (Date.now()); 0 before the first check. */
  confirmedAt = 0;

  constructor(private readonly opts: SyncLoopOptions) {}

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopper.abort();
    this.wake.abort();
    await this.running;
  }

  /** Fetches and applies the current plan now; rejects if the control plane can't be reached. */
  async refreshNow(): Promise<void> {
    await this.fetchAndApply(false, undefined);
    this.wake.abort(); // restart the long-poll with the new version
  }

  private async loop(): Promise<void> {
    const sleep = this.opts.sleep ?? abortableSleep;
    let backoff = this.opts.intervalMs;
    while (!this.stopper.signal.aborted) {
      const started = Date.now();
      if (this.wake.signal.aborted) this.wake = new AbortController();
      const signal = AbortSignal.any([this.stopper.signal, this.wake.signal]);
      let ok = true;
      try {
        await this.fetchAndApply(true, signal);
        backoff = this.opts.intervalMs;
        if (this.failing) {
          this.failing = false;
          this.opts.log('sync: control plane reachable again');
        }
      } catch (err) {
        if (this.stopper.signal.aborted) break;
        if (this.wake.signal.aborted) continue;
        ok = false;
        this.errors++;
        if (!this.failing) {
          this.failing = true;
          this.opts.log(`sync: ${err instanceof Error ? err.message : String(err)}; keeping the last tree and retrying`);
        }
        backoff = Math.min(MAX_BACKOFF_MS, Math.max(this.opts.intervalMs, backoff * 2));
      }
      const pause = ok ? this.opts.intervalMs - (Date.now() - started) : backoff;
      if (pause > 0) await sleep(pause, signal);
    }
  }

  private async fetchAndApply(longPoll: boolean, signal: AbortSignal | undefined): Promise<void> {
    const seq = ++this.seq;
    const etag = longPoll ? this.opts.currentVersion() : undefined;
    let plan: Plan | null;
    try {
      plan = await this.opts.client.plan({
        threshold: this.opts.threshold,
        etag,
        waitMs: longPoll && etag !== '' ? this.opts.intervalMs : 0,
        signal,
      });
    } catch (err) {
      if (isKnowledgeError(err) && err.code === 'unauthorized' && seq > this.appliedSeq) {
        this.appliedSeq = seq;
        this.opts.revoked(err.message);
      }
      throw err;
    }
    this.syncs++;
    if (seq >= this.appliedSeq) this.confirmedAt = Date.now();
    if (plan === null || seq < this.appliedSeq) return;
    this.appliedSeq = seq;
    if (plan.version !== this.opts.currentVersion()) this.opts.apply(plan);
  }
}
