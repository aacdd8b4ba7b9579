// StrykerJS over src/core, src/client or src/mcp against the in-process tests
// that exercise that folder (folder-tests.vitest.config.ts):
//   npm run test:stryker -- mcp -- test/stryker/folder-tests.stryker.mjs
// Add `--incremental` to rerun only the mutants whose code or tests changed.
import base from '../../stryker.config.mjs';

const folder = process.env.KNOWLEDGEFS_STRYKER_FOLDER ?? 'core';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'test/stryker/folder-tests.vitest.config.ts' },
  jsonReporter: { fileName: `reports/mutation/folder-tests-${folder}.json` },
  incrementalFile: `reports/stryker-incremental-${folder}.json`,
};
