import { defineConfig } from 'vitest/config';

// A quick lower bound for the rooms whose own tests are unit tests: Stryker
// runs each mutant against these files only, not the whole in-process set
// (vitest.config.ts), where a mutant in code every HTTP test passes through
// is run against hundreds of tests and a run over src/server takes days on a
// 2-core machine. A mutant these kill the whole set kills too; one that
// survives here may still be killed there, so the score is at most the true one.
// KNOWLEDGEFS_STRYKER_TESTS (comma-separated test/ file names) replaces the list.
const DEFAULT = [
  'audit-buffer', 'audit-log', 'blob-presence', 'byte-budget', 'dir-pack-index', 'plan-wakeups', 's3-signing',
  'scan-slices', 'server-guidance', 'server-options', 'session-record', 'session-registry', 'state-file', 'store-config',
  'blob-cache', 'gc', 'gc-logic', 'metered-object-store', 's3-object-store', 's3-object-store-answers',
  'directory', 'dir-pack-store', 'object-store', 'data-watch', 'rescan-loop', 'directory-source', 'pack-sources',
  'membership', 'membership-body-cap', 'route-parts', 'router', 'http-adapter', 'admin-routes', 'can-load-route',
  'control-plane', 'open-session-state', 'batch-route', 'explain-route', 'plan-route', 'runner-routes', 'bucket-pack-store',
];
const names = process.env.KNOWLEDGEFS_STRYKER_TESTS?.split(',').filter((n) => n !== '') ?? DEFAULT;

export default defineConfig({
  test: {
    include: names.map((n) => `test/${n.replace(/\.test\.ts$/, '')}.test.ts`),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
