// Docs that back each claim with a test name (`file.test.ts › name`, more
// names of the same file as `› name`): the names they give, and those that
// point at no test, so a doc cannot silently drift from its tests.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './control-plane.js';

/** Every [file, test name] pair a doc names. */
export function namedTests(doc: string): [string, string][] {
  const named: [string, string][] = [];
  for (const cell of doc.matchAll(/`([a-z0-9-]+\.test\.ts) › ([^`]+)`((?:, `› [^`]+`)*)/g)) {
    named.push([cell[1] as string, cell[2] as string]);
    for (const more of (cell[3] ?? '').matchAll(/`› ([^`]+)`/g)) named.push([cell[1] as string, more[1] as string]);
  }
  return named;
}

/** The named tests whose file does not contain the name. */
export function missingTests(named: readonly [string, string][]): [string, string][] {
  return named.filter(([file, name]) => !readFileSync(join(REPO_ROOT, 'test', file), 'utf8').replace(/\\'/g, "'").includes(name));
}
