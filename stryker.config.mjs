// StrykerJS over the parts whose tests run in-process. Run it through
// `npm run test:stryker -- FOLDER` (scripts/stryker.mjs), which picks the
// folder and the Node line Stryker needs.
const folder = process.env.KNOWLEDGEFS_STRYKER_FOLDER ?? 'core';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  // Forks, as in test/stryker/vitest.config.ts: the vitest runner's own default
  // (threads) overrides it, and a worker thread may not set process.umask(),
  // which the daemon's control socket does when it binds.
  vitest: { configFile: 'test/stryker/vitest.config.ts', related: false, pool: 'forks' },
  coverageAnalysis: 'perTest',
  mutate: [`src/${folder}/**/*.ts`],
  concurrency: 1,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: `reports/mutation/${folder}.json` },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  thresholds: { high: 90, low: 80, break: null },
};
