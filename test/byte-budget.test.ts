// ByteBudget: a semaphore counted in bytes. Work runs at once while the
// budget holds it, waits otherwise, is served in order (a large reservation
// is not starved by small ones), and gives its bytes back even when it fails.

import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../src/store/publication/byte-budget.js';

/** Work that runs until `release()`, recording when it started. */
function gate(name: string, started: string[]) {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return {
    work: async () => {
      started.push(name);
      await done;
      return name;
    },
    release: () => release(),
  };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('ByteBudget', () => {
  it('runs work at once while the budget holds it, up to exactly the total', async () => {
    const budget = new ByteBudget(10);
    const started: string[] = [];
    const a = gate('a', started);
    const b = gate('b', started);
    const pa = budget.with(4, a.work);
    const pb = budget.with(6, b.work);
    await settle();
    expect(started).toEqual(['a', 'b']);
    a.release();
    b.release();
    expect(await Promise.all([pa, pb])).toEqual(['a', 'b']);
  });

  it('waits while others hold too much, and runs when they give it back', async () => {
    const budget = new ByteBudget(10);
    const started: string[] = [];
    const a = gate('a', started);
    const b = gate('b', started);
    const pa = budget.with(6, a.work);
    const pb = budget.with(5, b.work);
    await settle();
    expect(started).toEqual(['a']);
    a.release();
    await pa;
    await settle();
    expect(started).toEqual(['a', 'b']);
    b.release();
    expect(await pb).toBe('b');
  });

  it('serves waiters in order: a small one does not overtake a large one waiting', async () => {
    const budget = new ByteBudget(10);
    const started: string[] = [];
    const a = gate('a', started);
    const big = gate('big', started);
    const small = gate('small', started);
    const pa = budget.with(5, a.work);
    const pbig = budget.with(8, big.work);
    // 5 + 2 fits, but the large reservation came first.
    const psmall = budget.with(2, small.work);
    await settle();
    expect(started).toEqual(['a']);
    a.release();
    await pa;
    await settle();
    // 8 + 2 fits exactly now: both wake, the large one first.
    expect(started).toEqual(['a', 'big', 'small']);
    big.release();
    small.release();
    await Promise.all([pbig, psmall]);
  });

  it('wakes waiters only as far as the budget goes', async () => {
    const budget = new ByteBudget(10);
    const started: string[] = [];
    const a = gate('a', started);
    const b = gate('b', started);
    const c = gate('c', started);
    const pa = budget.with(10, a.work);
    const pb = budget.with(6, b.work);
    const pc = budget.with(6, c.work);
    await settle();
    a.release();
    await pa;
    await settle();
    expect(started).toEqual(['a', 'b']);
    b.release();
    await pb;
    await settle();
    expect(started).toEqual(['a', 'b', 'c']);
    c.release();
    await pc;
  });

  it('a reservation larger than the budget holds the whole budget, and runs once it is free', async () => {
    const budget = new ByteBudget(10);
    const started: string[] = [];
    const huge = gate('huge', started);
    const after = gate('after', started);
    const ph = budget.with(50, huge.work);
    const pafter = budget.with(1, after.work);
    await settle();
    expect(started).toEqual(['huge']);
    huge.release();
    await ph;
    await settle();
    expect(started).toEqual(['huge', 'after']);
    after.release();
    await pafter;
  });

  it('gives the bytes back when the work fails', async () => {
    const budget = new ByteBudget(10);
    await expect(budget.with(10, () => Promise.reject(new Error('upload failed')))).rejects.toThrow('upload failed');
    const started: string[] = [];
    const a = gate('a', started);
    const pa = budget.with(10, a.work);
    await settle();
    expect(started).toEqual(['a']);
    a.release();
    await pa;
  });
});
