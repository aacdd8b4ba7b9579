// When the data directory is rescanned, on a fake clock: a noticed change
// after the debounce, the periodic full rescan after the last full one, now()
// at once; scans never overlap, work noticed during a scan follows it, and a
// slow scan spaces the next one out. A scan due "now" that was set from
// within a timer starts 1 ms later (setTimeout's least delay): the times
// below include it.

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { emptyWork, type ScanWork } from '../src/server/packs/data-watch.js';
import { DEBOUNCE_MS, RescanLoop } from '../src/server/packs/rescan-loop.js';

const HOUR = 3_600_000;
const pack = (scope: string, dir = ''): ScanWork => ({ ...emptyWork(), packs: new Map([[scope, new Set([dir])]]) });

/** What a scan was given, in short: `full` or the packs' names. */
const short = (w: ScanWork) => (w.full ? 'full' : [...w.packs.keys()].sort().join('+'));

let scans: string[];
let startedAt: number[];
let loop: RescanLoop | undefined;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
  scans = [];
  startedAt = [];
});
afterEach(async () => {
  // A scan still running ends on the fake clock.
  const closing = loop?.close();
  await vi.advanceTimersByTimeAsync(HOUR);
  await closing;
  loop = undefined;
  vi.useRealTimers();
});

/** A loop whose scans take `scanMs` of fake time each. */
function loopOf(options: { fullMs?: () => number; scanMs?: number; debounceMs?: number } = {}): RescanLoop {
  loop = new RescanLoop({
    scan: async (work) => {
      scans.push(short(work));
      startedAt.push(performance.now());
      if (options.scanMs) await new Promise((r) => setTimeout(r, options.scanMs));
    },
    fullIntervalMs: options.fullMs ?? (() => HOUR),
    ...(options.debounceMs !== undefined ? { debounceMs: options.debounceMs } : {}),
  });
  return loop;
}

describe('RescanLoop', () => {
  it('a full rescan every interval after the last full one ended, the interval read again each time', async () => {
    let interval = 1000;
    loopOf({ fullMs: () => interval, scanMs: 100 });
    await vi.advanceTimersByTimeAsync(1000);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['full']);
    interval = 300;
    // Ends at 1101; the next is due 300 later (and at least 2 × 100 after the end).
    await vi.advanceTimersByTimeAsync(400);
    expect(scans).toEqual(['full']);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['full', 'full']);
    expect(startedAt).toEqual([1001, 1402]);
  });

  it('a full rescan is spaced out to twice the last scan\'s duration when the interval is shorter', async () => {
    loopOf({ fullMs: () => 100, scanMs: 300 });
    await vi.advanceTimersByTimeAsync(101 + 300 + 600 + 1);
    expect(startedAt).toEqual([101, 1001]); // due 401 + 2 × 300, not 401 + 100
  });

  it('a noticed change after the debounce, with what else was noticed meanwhile', async () => {
    expect(DEBOUNCE_MS).toBe(50);
    loopOf();
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(30);
    loop?.notice(pack('team_a'));
    await vi.advanceTimersByTimeAsync(19);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['account+team_a']);
  });

  it('the debounce can be set', async () => {
    loopOf({ debounceMs: 5 });
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(4);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['account']);
  });

  it('now(): a full rescan at once, resolved when a scan started after the call has ended', async () => {
    loopOf({ scanMs: 40 });
    let done = false;
    const now = loop?.now().then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(scans).toEqual(['full']);
    await vi.advanceTimersByTimeAsync(39);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await now;
    expect(done).toBe(true);
  });

  it('now() during a scan waits for the next scan, which follows at once', async () => {
    loopOf({ scanMs: 100 });
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(50);
    expect(scans).toEqual(['account']);
    let done = false;
    void loop?.now().then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(101); // the first scan ends at 150: the full one starts then
    expect(scans).toEqual(['account', 'full']);
    expect(startedAt).toEqual([50, 151]);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(100);
    expect(done).toBe(true);
  });

  it('work noticed during a scan runs after it, no sooner than twice its duration after its end', async () => {
    loopOf({ scanMs: 200 });
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(60); // scan 1: 50..250
    loop?.notice(pack('team_a'));
    await vi.advanceTimersByTimeAsync(190 + 399);
    expect(scans).toEqual(['account']);
    await vi.advanceTimersByTimeAsync(1); // 250 + 2 × 200
    expect(scans).toEqual(['account', 'team_a']);
    expect(startedAt).toEqual([50, 650]);
  });

  it('an earlier due time wins over a later one; a later notice does not push the scan back', async () => {
    loopOf({ debounceMs: 50 });
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(10);
    void loop?.now();
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['full']);
    expect(startedAt).toEqual([10]);
    await vi.advanceTimersByTimeAsync(HOUR - 100);
    expect(scans).toEqual(['full']); // the account was in that scan
  });

  it('a sooner scan replaces the later timer: work noticed while it runs still waits for it to end', async () => {
    let running = 0;
    let most = 0;
    loop = new RescanLoop({
      scan: async (work) => {
        scans.push(short(work));
        startedAt.push(performance.now());
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 100));
        running--;
      },
      fullIntervalMs: () => HOUR,
    });
    loop.notice(pack('account')); // due at 50
    await vi.advanceTimersByTimeAsync(10);
    void loop.now(); // due now: runs 10..110
    await vi.advanceTimersByTimeAsync(20);
    loop.notice(pack('team_a')); // pending behind the running scan, past the 50 the first timer was set for
    await vi.advanceTimersByTimeAsync(400);
    expect(scans).toEqual(['full', 'team_a']);
    expect(startedAt).toEqual([10, 310]); // 110 + 2 × 100
    expect(most).toBe(1);
  });

  it('a scan of noticed changes does not push back the periodic full rescan', async () => {
    loopOf({ fullMs: () => 1000 });
    await vi.advanceTimersByTimeAsync(900);
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(101);
    expect(scans).toEqual(['account', 'full']);
    expect(startedAt).toEqual([950, 1001]); // due 1000, set from within a timer
  });

  it('retime() to a longer interval: the full rescan the old one set does not come', async () => {
    let interval = HOUR;
    loopOf({ fullMs: () => interval });
    await vi.advanceTimersByTimeAsync(500);
    interval = 2 * HOUR;
    loop?.retime();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(2 * HOUR);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(startedAt).toEqual([2 * HOUR + 501]);
  });

  it('close() leaves no timer behind, whatever was scheduled, and none is set after it', async () => {
    loopOf({ fullMs: () => 1000 });
    loop?.notice(pack('account'));
    expect(vi.getTimerCount()).toBe(2); // the debounce and the full rescan
    await loop?.close();
    expect(vi.getTimerCount()).toBe(0);
    loop?.notice(pack('team_a'));
    loop?.retime();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('retime(): the next full rescan follows the new interval from now', async () => {
    let interval = HOUR;
    loopOf({ fullMs: () => interval });
    await vi.advanceTimersByTimeAsync(500);
    interval = 100;
    loop?.retime();
    await vi.advanceTimersByTimeAsync(100);
    expect(scans).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(scans).toEqual(['full']);
    expect(startedAt).toEqual([601]);
  });

  it('close(): waits for the running scan, resolves waiting now() calls, and nothing runs after', async () => {
    loopOf({ scanMs: 100 });
    loop?.notice(pack('account'));
    await vi.advanceTimersByTimeAsync(50);
    const waiting = loop?.now() as Promise<void>;
    loop?.notice(pack('team_a'));
    let closed = false;
    const closing = loop?.close().then(() => {
      closed = true;
    });
    await vi.advanceTimersByTimeAsync(99);
    expect(closed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await closing;
    await waiting;
    await vi.advanceTimersByTimeAsync(HOUR);
    expect(scans).toEqual(['account']);
    // After close: now() resolves at once, notices and retime do nothing.
    await loop?.now();
    loop?.notice(pack('team_b'));
    loop?.retime();
    await vi.advanceTimersByTimeAsync(HOUR);
    expect(scans).toEqual(['account']);
  });
});
