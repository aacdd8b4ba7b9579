// Per-scope open grants, cached for at most --grant-ttl.
//
// A grant is valid from the moment its request was *sent* (not answered)
// for ttl milliseconds, so the cache never extends a decision past what the
// control plane said at that time. ttl 0 asks on every open and never shares
// an answer between opens. With ttl > 0, concurrent checks of one scope
// share one request. A denial is never cached: the caller removes the scope.
// The clock is injected so tests need no sleeps. Bounded: one entry per
// scope in the tree, and `forget` drops a scope's entry.

import type { ControlClient } from '../control-plane/control-client.js';

export type Clock = () => number;

/** Told of every change of a scope's deadline: `untilMs` (a clock time), or 0 once it has none. */
export type GrantListener = (scope: string, untilMs: number) => void;

export class GrantCache {
  private readonly valid = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<void>>();
  /** Grants asked of the control plane, and opens that used a fresh one instead (metrics). */
  requests = 0;
  reused = 0;
  private listener: GrantListener | undefined;

  constructor(
    private readonly client: Pick<ControlClient, 'grant'>,
    private readonly ttlMs: number,
    private readonly clock: Clock = Date.now,
  ) {}

  /**
   * Hears every deadline from now on (a binding that answers opens itself
   * while a grant is fresh: native-fuse-adapter.ts), starting with the ones
   * held now. One listener.
   */
  watch(listener: GrantListener): void {
    this.listener = listener;
    for (const [scope, until] of this.valid) listener(scope, until);
  }

  /** True when a grant for `scope` is still within its TTL. */
  isFresh(scope: string): boolean {
    const until = this.valid.get(scope);
    return until !== undefined && this.clock() < until;
  }

  /** `isFresh`, counting a fresh grant as reused: for an open that skips `check`. */
  reuse(scope: string): boolean {
    const fresh = this.isFresh(scope);
    if (fresh) this.reused++;
    return fresh;
  }

  /** Resolves when `scope` may be opened now; rejects with the control plane's answer otherwise. */
  check(scope: string): Promise<void> {
    if (this.ttlMs <= 0) return this.ask(scope);
    if (this.reuse(scope)) return Promise.resolve();
    let pending = this.inflight.get(scope);
    if (pending === undefined) {
      pending = this.ask(scope).finally(() => this.inflight.delete(scope));
      this.inflight.set(scope, pending);
    }
    return pending;
  }

  /**
   * Asks for `scope` again now, in the background, unless a request is out:
   * a grant renewed before it lapses, so opens in use never wait for one. A
   * refusal drops the grant (the next open asks, and hears the refusal).
   */
  renew(scope: string): void {
    if (this.ttlMs <= 0 || this.inflight.has(scope)) return;
    const pending = this.ask(scope).finally(() => this.inflight.delete(scope));
    this.inflight.set(scope, pending);
    pending.catch(() => undefined);
  }

  /** Records a grant learned another way (a successful file fetch is an authorised open). */
  record(scope: string, askedAt: number): void {
    if (this.ttlMs <= 0) return;
    const until = askedAt + this.ttlMs;
    if ((this.valid.get(scope) ?? 0) < until) {
      this.valid.set(scope, until);
      this.listener?.(scope, until);
    }
  }

  forget(scope: string): void {
    if (this.valid.delete(scope)) this.listener?.(scope, 0);
  }

  forgetAll(): void {
    const scopes = [...this.valid.keys()];
    this.valid.clear();
    for (const scope of scopes) this.listener?.(scope, 0);
  }

  private async ask(scope: string): Promise<void> {
    const askedAt = this.clock();
    this.requests++;
    try {
      await this.client.grant(scope);
    } catch (err) {
      this.forget(scope);
      throw err;
    }
    this.record(scope, askedAt);
  }
}
