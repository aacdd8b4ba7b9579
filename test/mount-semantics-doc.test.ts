// docs/SEMANTICS.md backs every claim with a test name: this keeps those
// names pointing at tests that exist, so the doc can't silently drift.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/mount.js';

it('every test named in docs/SEMANTICS.md exists', () => {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'SEMANTICS.md'), 'utf8');
  const named: Array<[string, string]> = [];
  for (const cell of doc.matchAll(/`([a-z0-9-]+\.test\.ts) › ([^`]+)`((?:, `› [^`]+`)*)/g)) {
    named.push([cell[1]!, cell[2]!]);
    for (const more of (cell[3] ?? '').matchAll(/`› ([^`]+)`/g)) named.push([cell[1]!, more[1]!]);
  }
  expect(named.length).toBeGreaterThan(20);
  const missing = named.filter(([file, name]) => {
    const source = readFileSync(join(REPO_ROOT, 'test', file), 'utf8').replace(/\\'/g, "'");
    return !source.includes(name);
  });
  expect(missing).toEqual([]);
});
