// Recently changed files (a FUSE binding with one page cache per path): how
// long an open must wait after a change, and that old entries age out.

import { describe, expect, it } from 'vitest';
import { ChangedFiles } from '../src/daemon/fuse/changed-files.js';

describe('ChangedFiles', () => {
  it('an open waits out the rest of the window after a change; unchanged paths never wait', () => {
    const clock = { now: 10_000 };
    const changed = new ChangedFiles(1100, () => clock.now);
    changed.record(['/account/a.md', '/team_x/b.md']);
    expect(changed.waitMs('/account/a.md')).toBe(1100);
    expect(changed.waitMs('/account/other.md')).toBe(0);
    clock.now += 400;
    expect(changed.waitMs('/team_x/b.md')).toBe(700);
    clock.now += 700;
    expect(changed.waitMs('/team_x/b.md')).toBe(0);
    expect(changed.waitMs('/account/a.md')).toBe(0);
  });

  it('a second change restarts the window; entries older than it are dropped at the next record', () => {
    const clock = { now: 0 };
    const changed = new ChangedFiles(1000, () => clock.now);
    changed.record(['/a', '/b']);
    clock.now = 900;
    changed.record(['/a']);
    expect(changed.waitMs('/a')).toBe(1000);
    expect(changed.waitMs('/b')).toBe(100);
    clock.now = 1500;
    changed.record(['/c']);
    expect(changed.size()).toBe(2); // /b aged out; /a (900) and /c stay
    expect(changed.waitMs('/a')).toBe(400);
  });
});
