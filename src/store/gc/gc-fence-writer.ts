// gc's side of the fence (core/gc-fence.ts, rule 1): gc.json written
// "deleting" with this run's id before the mark, renewed before every batch
// (and again before sending one when the check took half its lifetime),
// and "idle" once every delete this run sent was answered. A delete whose
// answer never came may still reach the store, so after one the fence is
// left to expire rather than lowered; so it is when another gc took the
// fence over (this one lost its lock), which only that gc may lower.

import { randomBytes } from 'node:crypto';
import { GC_FENCE_KEY, GC_FENCE_TTL_MS, MAX_GC_FENCE_BYTES, parseGcFence, serializeGcFence, type GcFence } from '../../core/gc-fence.js';
import type { SweepableStore } from '../objects/object-store.js';

export class FenceWriter {
  readonly run = randomBytes(8).toString('hex');
  private renewedAt = Number.NEGATIVE_INFINITY;
  /** A delete was sent and not answered: it may still land. */
  private unanswered = false;

  constructor(
    private readonly store: SweepableStore,
    private readonly clock: () => number,
    private readonly ttlMs = GC_FENCE_TTL_MS,
  ) {}

  private write(state: GcFence['state'], at: number): Promise<void> {
    return this.store.put(GC_FENCE_KEY, serializeGcFence({ state, run: this.run, expiresAt: new Date(at + this.ttlMs).toISOString() }), 'application/json');
  }

  /** Raises (or renews) the fence. */
  async deleting(): Promise<void> {
    const at = this.clock();
    await this.write('deleting', at);
    this.renewedAt = at;
  }

  async renewIfDue(): Promise<void> {
    if (this.clock() - this.renewedAt > this.ttlMs / 2) await this.deleting();
  }

  /** Sends one batch of deletes; the fence stays up for good (until it expires) if no answer comes. */
  async sending(send: () => Promise<void>): Promise<void> {
    this.unanswered = true;
    await send();
    this.unanswered = false;
  }

  /** Lowers the fence, when every delete was answered and it is still this run's. */
  async idle(): Promise<void> {
    if (this.unanswered) return;
    const got = await this.store.get(GC_FENCE_KEY, { maxBytes: MAX_GC_FENCE_BYTES });
    if (got === null || got === 'not-modified') return;
    let fence: GcFence;
    try {
      fence = parseGcFence(got.bytes);
    } catch {
      return;
    }
    if (fence.run === this.run) await this.write('idle', this.clock());
  }
}
