// docs/SEMANTICS.md backs every claim with a test name. This keeps those
// names pointing at tests that exist, and checks that the named tests check
// the claim: every row has a deliberate breakage in
// scripts/mutations/breakages.json (or a reason it has none), run only
// against tests that row names. `npm run test:mutations` then shows each
// breakage is caught by them.

import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { missingTests, namedTests } from './helpers/doc-claims.js';
import { REPO_ROOT } from './helpers/mount.js';

interface Row {
  readonly behaviour: string;
  /** [file, test name] pairs. */
  readonly tests: readonly [string, string][];
}

interface Breakage {
  readonly id: string;
  readonly claim?: string;
  readonly tests: readonly { readonly file: string; readonly name: string }[];
}

const doc = readFileSync(join(REPO_ROOT, 'docs', 'SEMANTICS.md'), 'utf8');
const list = JSON.parse(readFileSync(join(REPO_ROOT, 'scripts', 'mutations', 'breakages.json'), 'utf8')) as {
  breakages: Breakage[];
  uncovered: Record<string, string>;
};

/** The table rows whose last cell names tests. */
function rows(): Row[] {
  const out: Row[] = [];
  for (const line of doc.split('\n')) {
    if (!line.startsWith('| ') || !line.endsWith(' |')) continue;
    const inner = line.slice(2, -2);
    const split = inner.lastIndexOf(' | ');
    if (split < 0) continue;
    const tests = namedTests(inner.slice(split + 3));
    if (tests.length > 0) out.push({ behaviour: inner.slice(0, split), tests });
  }
  return out;
}

describe('docs/SEMANTICS.md', () => {
  it('every test named in docs/SEMANTICS.md exists', () => {
    const named = rows().flatMap((r) => r.tests);
    expect(named.length).toBeGreaterThan(20);
    expect(missingTests(named)).toEqual([]);
  });

  it('every row has a deliberate breakage that only the tests it names are run against (or a stated reason why not)', () => {
    const table = rows();
    expect(table.length).toBeGreaterThan(20);
    const problems: string[] = [];
    const covered = new Set<Row>();
    for (const b of list.breakages) {
      if (b.claim === undefined) continue;
      const matches = table.filter((r) => r.behaviour.includes(b.claim!));
      if (matches.length !== 1) {
        problems.push(`${b.id}: its claim matches ${matches.length} rows: ${b.claim}`);
        continue;
      }
      const row = matches[0]!;
      covered.add(row);
      for (const t of b.tests) {
        if (!row.tests.some(([file, name]) => file === basename(t.file) && name === t.name)) {
          problems.push(`${b.id}: runs "${t.name}", which the row "${b.claim}" does not name`);
        }
      }
    }
    for (const row of table) {
      if (covered.has(row)) continue;
      const reason = Object.entries(list.uncovered).find(([start]) => row.behaviour.includes(start));
      if (reason === undefined) problems.push(`no breakage and no reason for the row: ${row.behaviour.slice(0, 90)}`);
    }
    for (const start of Object.keys(list.uncovered)) {
      const row = table.find((r) => r.behaviour.includes(start));
      if (row === undefined) problems.push(`uncovered names no row: ${start}`);
      else if (covered.has(row)) problems.push(`uncovered names a row that has a breakage: ${start}`);
    }
    expect(problems).toEqual([]);
  });
});
