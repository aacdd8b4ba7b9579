// ManifestWatch on its own, with a stand-in for the daemon's manifest sha256:
// nothing asked without a subscriber, a change told once, the starting sha256
// known before a subscription is confirmed, the interval stopped with the
// last subscriber, and a daemon that cannot be reached logged once. The
// server's use of it over the wire is in mcp-revisions.test.ts.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManifestWatch } from '../src/mcp/manifest-watch.js';

afterEach(() => { vi.useRealTimers(); });

function watchOver(initial: string) {
  const state = { sha: initial, asked: 0, down: false, changes: 0, logs: [] as string[] };
  const watch = new ManifestWatch({
    sha256: async () => {
      state.asked++;
      if (state.down) throw new Error('no daemon');
      return state.sha;
    },
    intervalMs: 1_000,
    log: (l) => state.logs.push(l),
  });
  watch.onChange = () => { state.changes++; };
  return { watch, state };
}

describe('ManifestWatch', () => {
  it('asks nothing while nobody subscribes, even when told to check', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.check();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(state.asked).toBe(0);
  });

  it('tells of each change once, from the sha256 known when the subscription was confirmed', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.subscribe('s1');
    expect(state.asked).toBe(1);
    state.sha = 'b';
    await watch.check();
    expect(state.changes).toBe(1);
    await vi.advanceTimersByTimeAsync(3_000); // three polls, nothing new
    expect(state.asked).toBe(5);
    expect(state.changes).toBe(1);
    state.sha = 'c';
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.changes).toBe(2);
  });

  it('confirms a subscription only once the sha256 it starts from is in', async () => {
    let answer: ((sha: string) => void) | undefined;
    let changes = 0;
    const watch = new ManifestWatch({ sha256: () => new Promise((resolve) => { answer = resolve; }), intervalMs: 60_000, log: () => undefined });
    watch.onChange = () => { changes++; };
    let confirmed = false;
    const subscribed = watch.subscribe('s1').then(() => { confirmed = true; });
    await new Promise((r) => setImmediate(r));
    expect(confirmed).toBe(false);
    answer?.('a');
    await subscribed;
    // A change made after the confirmation is told.
    const checked = watch.check();
    await new Promise((r) => setImmediate(r));
    answer?.('b');
    await checked;
    expect(changes).toBe(1);
    watch.close();
  });

  it('stops polling with the last subscriber, and starts afresh with the next', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.subscribe('s1');
    await watch.subscribe('s2');
    watch.unsubscribe('s1');
    await vi.advanceTimersByTimeAsync(1_000);
    const asked = state.asked;
    watch.unsubscribe('s2');
    state.sha = 'b';
    await vi.advanceTimersByTimeAsync(5_000);
    expect(state.asked).toBe(asked);
    await watch.subscribe('s3'); // starts from b: b is no change
    await watch.check();
    expect(state.changes).toBe(0);
  });

  it('logs a daemon that cannot be reached once, and carries on when it is back', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.subscribe('s1');
    state.down = true;
    await vi.advanceTimersByTimeAsync(3_000);
    expect(state.logs).toEqual(['manifest not checked for changes: no daemon']);
    state.down = false;
    state.sha = 'b';
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.changes).toBe(1);
    watch.close();
  });
});
