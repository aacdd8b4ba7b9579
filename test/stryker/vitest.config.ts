import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// The tests StrykerJS runs against each mutant: those that exercise src/ in
// this process. A test that spawns the CLI or mounts runs dist/, which Stryker
// does not mutate, so it can only slow Stryker down; such files are left out
// by what they import, so a new test file needs no list to be updated.
const SPAWNS = /from '(node:child_process|\.\.\/helpers\/mount\.js|\.\.\/helpers\/control-plane\.js)'/;

const include = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .filter((name) => !SPAWNS.test(readFileSync(join('test', name), 'utf8')))
  .map((name) => `test/${name}`);

export default defineConfig({
  test: {
    include,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
