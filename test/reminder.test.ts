// The reminder builder: date line, changed and deleted read-set files (paths
// only, each reported once), new files never.

import { describe, expect, it } from 'vitest';
import { buildReminder, isValidDate } from '../src/core/session/reminder.js';

describe('buildReminder', () => {
  it('says only the date when nothing changed', () => {
    const r = buildReminder({ date: '2025-03-01', readSet: [{ path: 'account/a.md', sha256: 'h1' }], current: () => 'h1' });
    expect(r.text).toBe("Today's date is 2025-03-01.\n");
    expect(r.changed).toEqual([]);
    expect(r.deleted).toEqual([]);
    expect(r.nextReadSet).toEqual([{ path: 'account/a.md', sha256: 'h1' }]);
  });

  it('names changed and deleted files as knowledge/… paths, without content', () => {
    const now: Record<string, string | null> = { 'team_x/a.md': 'h2', 'team_x/b.md': 'hb', 'account/gone.md': null };
    const r = buildReminder({
      date: '2025-03-02',
      readSet: [
        { path: 'team_x/a.md', sha256: 'h1' },
        { path: 'team_x/b.md', sha256: 'hb' },
        { path: 'account/gone.md', sha256: 'hg' },
      ],
      current: (p) => now[p] ?? null,
    });
    expect(r.changed).toEqual(['team_x/a.md']);
    expect(r.deleted).toEqual(['account/gone.md']);
    expect(r.text).toContain("Today's date is 2025-03-02.");
    expect(r.text).toMatch(/changed since you read them[^\n]*\n- knowledge\/team_x\/a\.md\n/);
    expect(r.text).toMatch(/gone or can no longer be loaded[^\n]*\n- knowledge\/account\/gone\.md\n$/);
    expect(r.text).not.toContain('team_x/b.md');
    expect(r.nextReadSet).toEqual([
      { path: 'team_x/a.md', sha256: 'h2' },
      { path: 'team_x/b.md', sha256: 'hb' },
    ]);
  });

  it('reports each change once when the caller stores nextReadSet', () => {
    let sha: string | null = 'v1';
    let readSet = [{ path: 'team_x/a.md', sha256: 'v1' }];
    const step = () => {
      const r = buildReminder({ date: '2025-03-03', readSet, current: () => sha });
      readSet = r.nextReadSet;
      return r;
    };
    expect(step().changed).toEqual([]);
    sha = 'v2';
    expect(step().changed).toEqual(['team_x/a.md']);
    expect(step().changed).toEqual([]);
    sha = 'v3';
    expect(step().changed).toEqual(['team_x/a.md']);
    sha = null;
    expect(step().deleted).toEqual(['team_x/a.md']);
    expect(step().deleted).toEqual([]);
    expect(readSet).toEqual([]);
  });

  it('never mentions files outside the read set (new files)', () => {
    const r = buildReminder({ date: '2025-03-04', readSet: [], current: () => 'anything' });
    expect(r.text).toBe("Today's date is 2025-03-04.\n");
  });

  it('collapses duplicate read-set entries', () => {
    const r = buildReminder({ date: '2025-03-04', readSet: [{ path: 'account/a', sha256: 'x' }, { path: 'account/a', sha256: 'y' }], current: () => 'z' });
    expect(r.changed).toEqual(['account/a']);
    expect(r.nextReadSet).toEqual([{ path: 'account/a', sha256: 'z' }]);
  });

  it('rejects a malformed date', () => {
    for (const d of ['2025-3-1', '2025-02-30', 'today', '2025-13-01', '']) {
      expect(() => buildReminder({ date: d, readSet: [], current: () => null }), d).toThrow(/invalid date/);
    }
    expect(isValidDate('2024-02-29')).toBe(true);
  });
});

describe('a file whose state cannot be told now (membership outage)', () => {
  it('keeps its entry and is not mentioned', () => {
    const r = buildReminder({
      date: '2025-01-02',
      readSet: [{ path: 'team_a/x.md', sha256: 'a' }, { path: 'account/y.md', sha256: 'b' }],
      current: (p) => (p.startsWith('team_a/') ? undefined : 'c'),
    });
    expect(r.deleted).toEqual([]);
    expect(r.changed).toEqual(['account/y.md']);
    expect(r.text).not.toContain('team_a');
    expect(r.nextReadSet).toEqual([{ path: 'team_a/x.md', sha256: 'a' }, { path: 'account/y.md', sha256: 'c' }]);
  });
});
