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
    expect(vi.getTimerCount()).toBe(1);
    watch.unsubscribe('s1');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.asked).toBe(2); // s2 still subscribed: still polled
    watch.unsubscribe('s2');
    expect(vi.getTimerCount()).toBe(0);
    state.sha = 'b';
    await vi.advanceTimersByTimeAsync(5_000);
    expect(state.asked).toBe(2);
    await watch.subscribe('s3'); // starts from b: b is no change
    await watch.check();
    expect(state.changes).toBe(0);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.asked).toBe(5); // one timer, not one left over from before
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

  it('asks once for a second subscriber: it waits on the check already queued, and one timer polls for both', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.subscribe('s1');
    await watch.subscribe('s2');
    expect(state.asked).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(state.asked).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.asked).toBe(2);
    watch.close();
  });

  it('keeps polling when a key that never subscribed is dropped, and stops for good on close', async () => {
    vi.useFakeTimers();
    const { watch, state } = watchOver('a');
    await watch.subscribe('s1');
    watch.unsubscribe('nobody');
    expect(watch.subscribed).toBe(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(state.asked).toBe(3);
    watch.close();
    expect(watch.subscribed).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
    state.sha = 'b';
    await vi.advanceTimersByTimeAsync(5_000);
    await watch.check();
    expect(state.asked).toBe(3);
    expect(state.changes).toBe(0);
  });

  it('logs a failure that is not an Error by its text, and logs again after a success in between', async () => {
    vi.useFakeTimers();
    let fail: unknown;
    const logs: string[] = [];
    const watch = new ManifestWatch({
      sha256: async () => { if (fail !== undefined) throw fail; return 'a'; },
      intervalMs: 1_000,
      log: (l) => logs.push(l),
    });
    await watch.subscribe('s1');
    fail = 'socket closed';
    await vi.advanceTimersByTimeAsync(2_000);
    fail = undefined;
    await vi.advanceTimersByTimeAsync(1_000);
    fail = new Error('no daemon');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(logs).toEqual(['manifest not checked for changes: socket closed', 'manifest not checked for changes: no daemon']);
    watch.close();
  });

  it('holds no process open: its timer is unref\'d', async () => {
    const { watch } = watchOver('a');
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    await watch.subscribe('s1');
    expect(timers()).toBe(before);
    watch.close();
  });

  it('logs a daemon already out when the first subscription opens', async () => {
    const { watch, state } = watchOver('a');
    state.down = true;
    await watch.subscribe('s1');
    expect(state.logs).toEqual(['manifest not checked for changes: no daemon']);
    watch.close();
  });
});

/** A watch whose daemon answers only when the test says so, one answer per ask, in order. */
function heldWatch() {
  const answers: ((sha: string) => void)[] = [];
  let changes = 0;
  const watch = new ManifestWatch({ sha256: () => new Promise((resolve) => { answers.push(resolve); }), intervalMs: 60_000, log: () => undefined });
  watch.onChange = () => { changes++; };
  const tick = () => new Promise((r) => setImmediate(r));
  return { watch, answers, changes: () => changes, tick };
}

describe('ManifestWatch, checks still in flight when subscriptions come and go', () => {
  it('tells nothing of a change seen after the last subscriber left mid-check', async () => {
    const { watch, answers, changes, tick } = heldWatch();
    const subscribed = watch.subscribe('s1');
    await tick();
    answers[0]?.('a');
    await subscribed;
    const checked = watch.check();
    await tick();
    watch.unsubscribe('s1');
    answers[1]?.('b');
    await checked;
    expect(changes()).toBe(0);
  });

  it('asks nothing more for checks queued before the last subscriber left', async () => {
    const { watch, answers, tick } = heldWatch();
    const subscribed = watch.subscribe('s1');
    await tick();
    answers[0]?.('a');
    await subscribed;
    const first = watch.check();
    const second = watch.check();
    await tick();
    expect(answers).toHaveLength(2);
    watch.unsubscribe('s1');
    answers[1]?.('b');
    await Promise.all([first, second]);
    expect(answers).toHaveLength(2);
  });

  it('tells the next subscriber nothing from a check begun before the last one left', async () => {
    const { watch, answers, changes, tick } = heldWatch();
    const s1 = watch.subscribe('s1');
    await tick();
    answers[0]?.('a');
    await s1;
    const checked = watch.check(); // compares against a
    await tick();
    watch.unsubscribe('s1');
    const s2 = watch.subscribe('s2'); // starts afresh, after the check in flight
    answers[1]?.('b');
    await checked;
    await tick();
    answers[2]?.('b');
    await s2;
    expect(changes()).toBe(0);
    watch.close();
  });

  it('never tells a change from the check a subscription starts from', async () => {
    const { watch, answers, changes, tick } = heldWatch();
    const s1 = watch.subscribe('s1');
    await tick();
    watch.unsubscribe('s1');
    const s2 = watch.subscribe('s2');
    answers[0]?.('a'); // s1's start, answered once s2 is in
    await s1;
    await tick();
    answers[1]?.('b'); // s2's start: its starting point, not a change
    await s2;
    expect(changes()).toBe(0);
    watch.close();
  });
});
