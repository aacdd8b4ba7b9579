// PlanWakeups: plan long-polls wake when the packs change (every session) or
// their session changes (that session only), never lose a wakeup between
// mark() and wait(), end on the timeout or an abort, and one session holds
// at most --max-long-polls at once.

import { describe, expect, it, vi } from 'vitest';
import { PlanWakeups } from '../src/server/http/plan-wakeups.js';

const HOUR = 3_600_000;
/** Whether `p` settled within a turn of the event loop. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('PlanWakeups', () => {
  it('allChanged wakes every session waiting', async () => {
    const w = new PlanWakeups(4);
    const a = w.begin('a')!;
    const b = w.begin('b')!;
    const wa = a.wait(a.mark(), HOUR, new AbortController().signal);
    const wb = b.wait(b.mark(), HOUR, new AbortController().signal);
    expect(await settled(wa)).toBe(false);
    w.allChanged();
    expect(await settled(wa)).toBe(true);
    expect(await settled(wb)).toBe(true);
    a.end();
    b.end();
  });

  it('sessionChanged wakes that session only, every one of its waiters', async () => {
    const w = new PlanWakeups(4);
    const a1 = w.begin('a')!;
    const a2 = w.begin('a')!;
    const b = w.begin('b')!;
    const w1 = a1.wait(a1.mark(), HOUR, new AbortController().signal);
    const w2 = a2.wait(a2.mark(), HOUR, new AbortController().signal);
    const wb = b.wait(b.mark(), HOUR, new AbortController().signal);
    w.sessionChanged('a');
    w.sessionChanged('nobody-waiting');
    expect(await settled(w1)).toBe(true);
    expect(await settled(w2)).toBe(true);
    expect(await settled(wb)).toBe(false);
    w.allChanged();
    await wb;
    for (const p of [a1, a2, b]) p.end();
  });

  it('a change between mark() and wait() returns at once: no wakeup is lost', async () => {
    const w = new PlanWakeups(4);
    const a = w.begin('a')!;
    const m1 = a.mark();
    w.sessionChanged('a');
    expect(a.mark()).not.toBe(m1);
    expect(await settled(a.wait(m1, HOUR, new AbortController().signal))).toBe(true);
    const m2 = a.mark();
    w.allChanged();
    expect(await settled(a.wait(m2, HOUR, new AbortController().signal))).toBe(true);
    // Nothing since the mark: it waits.
    const m3 = a.mark();
    expect(a.mark()).toBe(m3);
    const pending = a.wait(m3, HOUR, new AbortController().signal);
    expect(await settled(pending)).toBe(false);
    w.allChanged();
    await pending;
    a.end();
  });

  it('ends after ms, or when the signal aborts (also one aborted before)', async () => {
    const w = new PlanWakeups(4);
    const a = w.begin('a')!;
    const started = performance.now();
    await a.wait(a.mark(), 30, new AbortController().signal);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    const ac = new AbortController();
    const aborted = a.wait(a.mark(), HOUR, ac.signal);
    expect(await settled(aborted)).toBe(false);
    ac.abort();
    expect(await settled(aborted)).toBe(true);
    expect(await settled(a.wait(a.mark(), HOUR, ac.signal))).toBe(true);
    a.end();
    // After end, a wait returns at once.
    expect(await settled(a.wait(a.mark(), HOUR, new AbortController().signal))).toBe(true);
  });

  it('a woken waiter is gone: a later change does not count it twice, and a later wait waits again', async () => {
    const w = new PlanWakeups(4);
    const a = w.begin('a')!;
    const first = a.wait(a.mark(), HOUR, new AbortController().signal);
    w.sessionChanged('a');
    await first;
    const second = a.wait(a.mark(), HOUR, new AbortController().signal);
    expect(await settled(second)).toBe(false);
    w.sessionChanged('a');
    expect(await settled(second)).toBe(true);
    a.end();
  });

  it('caps long-polls per session; end() frees a place, once however often it is called', () => {
    const w = new PlanWakeups(2);
    const a1 = w.begin('a')!;
    const a2 = w.begin('a')!;
    expect(a1).not.toBeNull();
    expect(a2).not.toBeNull();
    expect(w.begin('a')).toBeNull();
    expect(w.begin('b')).not.toBeNull();
    a1.end();
    a1.end();
    const a3 = w.begin('a');
    expect(a3).not.toBeNull();
    expect(w.begin('a')).toBeNull();
    a2.end();
    a3!.end();
    // The session's state is gone with its last long-poll: a fresh one starts at none.
    const again = [w.begin('a'), w.begin('a'), w.begin('a')];
    expect(again.map((p) => p !== null)).toEqual([true, true, false]);
  });

  it("a session's state is dropped with its last long-poll: a change meanwhile is not kept for the next", async () => {
    const w = new PlanWakeups(4);
    const a = w.begin('a')!;
    const before = a.mark();
    a.end();
    w.sessionChanged('a');
    const next = w.begin('a')!;
    expect(next.mark()).toBe(before);
    next.end();
  });
});

describe('PlanWakeups leaves nothing behind', () => {
  it('a woken, aborted or timed-out wait clears its timer and its abort listener', async () => {
    const { getEventListeners } = await import('node:events');
    vi.useFakeTimers();
    try {
      const w = new PlanWakeups(4);
      const a = w.begin('a')!;
      const ac = new AbortController();
      const woken = a.wait(a.mark(), HOUR, ac.signal);
      expect(vi.getTimerCount()).toBe(1);
      expect(getEventListeners(ac.signal, 'abort')).toHaveLength(1);
      w.sessionChanged('a');
      await woken;
      expect(vi.getTimerCount()).toBe(0);
      expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
      const timedOut = a.wait(a.mark(), 10, ac.signal);
      await vi.advanceTimersByTimeAsync(10);
      await timedOut;
      expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
      a.end();
    } finally {
      vi.useRealTimers();
    }
  });
});
