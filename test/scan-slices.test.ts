// scan-slices: scans yield to the event loop once a slice has used its time,
// and a file is unchanged exactly when its inode, size, mtime and ctime are.

import { describe, expect, it } from 'vitest';
import { SLICE_MS, createSlicer, fingerprint, sameFingerprint } from '../src/store/data-dir/scan-slices.js';

describe('createSlicer', () => {
  it('is due once the slice has used its time, and starts a new slice after yielding', async () => {
    let t = 100;
    const slicer = createSlicer(8, () => t);
    expect(slicer.due()).toBe(false);
    t = 107.9;
    expect(slicer.due()).toBe(false);
    t = 108;
    expect(slicer.due()).toBe(true);
    let ranBetween = false;
    setImmediate(() => (ranBetween = true));
    await slicer.yield();
    expect(ranBetween).toBe(true);
    expect(slicer.due()).toBe(false);
    t = 116;
    expect(slicer.due()).toBe(true);
  });

  it('defaults to SLICE_MS of performance.now()', async () => {
    expect(SLICE_MS).toBe(8);
    const slicer = createSlicer();
    expect(slicer.due()).toBe(false);
    const until = performance.now() + SLICE_MS;
    while (performance.now() < until) {
      // spin through one slice
    }
    expect(slicer.due()).toBe(true);
  });
});

describe('fingerprints', () => {
  const a = { ino: 1, size: 2, mtimeMs: 3, ctimeMs: 4 };
  it('are the same only when all four fields are', () => {
    expect(sameFingerprint(a, { ...a })).toBe(true);
    expect(sameFingerprint(a, { ...a, ino: 9 })).toBe(false);
    expect(sameFingerprint(a, { ...a, size: 9 })).toBe(false);
    expect(sameFingerprint(a, { ...a, mtimeMs: 9 })).toBe(false);
    expect(sameFingerprint(a, { ...a, ctimeMs: 9 })).toBe(false);
  });

  it('copies exactly the four fields out of a Stats', () => {
    expect(fingerprint({ ...a, dev: 7, mode: 0o644 } as typeof a)).toEqual(a);
  });
});
