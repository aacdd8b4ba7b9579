import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// The tests StrykerJS runs against each mutant: those that exercise src/ in
// this process. A test that spawns the CLI or mounts runs dist/, which Stryker
// does not mutate, so it can only slow Stryker down (and a mount from the
// sandbox fails); such files are left out by what they import, so a new test
// file needs no list to be updated. The helpers hold both kinds: a file that
// takes only in-process ones (startControlPlane, waitFor, REPO_ROOT) stays in.
const CHILD_PROCESS = /from 'node:child_process'|import\('node:child_process'\)/;
const HELPER_IMPORT = /import\s*\{([^}]*)\}\s*from '\.\/helpers\/(?:mount|control-plane)\.js'/g;
const SPAWNING_HELPERS = new Set(['BIN', 'run', 'sh', 'startMount', 'fuseSuite', 'suiteNeeding', 'spawnControlPlane']);
// Spawn through src/ itself: fuse-binding builds the native addon with the
// compiler for the Node that runs it (Stryker's Node 24, with no headers here).
const SPAWNS_THROUGH_SRC = new Set(['fuse-binding.test.ts']);

function spawns(source: string): boolean {
  if (CHILD_PROCESS.test(source)) return true;
  for (const [, names] of source.matchAll(HELPER_IMPORT)) {
    const imported = (names as string).split(',').map((n) => n.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]);
    if (imported.some((n) => SPAWNING_HELPERS.has(n as string))) return true;
  }
  return false;
}

const include = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .filter((name) => !SPAWNS_THROUGH_SRC.has(name) && !spawns(readFileSync(join('test', name), 'utf8')))
  .map((name) => `test/${name}`);

export default defineConfig({
  test: {
    include,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
