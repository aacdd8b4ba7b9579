import { defineConfig } from 'vitest/config';

// The in-process tests that exercise one folder of src/, for StrykerJS
// (folder-tests.stryker.mjs): a mutant is run against these only, so a run
// over the folder takes minutes, not the hour the whole in-process set takes
// on a shared 2-core machine. A lower bound of the folder's score: the whole
// set (test/stryker/vitest.config.ts) can only kill more.
const TESTS: Record<string, string[]> = {
  core: [
    'tree', 'tree-changes', 'plan', 'plan-changes', 'policy', 'manifest', 'manifest.property', 'reminder',
    'metrics-core', 'prometheus-metrics', 'units', 'escape-for-log', 'paths', 'knowledge-path', 'can-load-wire',
    'core-parts', 'core-publication', 'client-library',
  ],
  client: ['client-library', 'mcp-in-process', 'can-load-wire', 'paths', 'knowledge-path'],
  mcp: ['mcp-in-process', 'mcp-stdio-wire', 'mcp-fs-tools', 'mcp-manifest-watch', 'mcp-listen-tracker', 'mcp-guidance'],
};

const folder = process.env.KNOWLEDGEFS_STRYKER_FOLDER ?? 'core';
const names = TESTS[folder];
if (names === undefined) throw new Error(`folder-tests.vitest.config.ts: no test list for src/${folder}`);

export default defineConfig({
  test: {
    include: names.map((name) => `test/${name}.test.ts`),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
