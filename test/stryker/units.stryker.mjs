// StrykerJS against the unit tests of some rooms only (units.vitest.config.ts):
// a quick lower bound of their score. Pick the files with --mutate:
//   npm run test:stryker -- server -- test/stryker/units.stryker.mjs --mutate 'src/server/access/audit-*.ts'
import base from '../../stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'test/stryker/units.vitest.config.ts' },
  jsonReporter: { fileName: `reports/mutation/units-${process.env.KNOWLEDGEFS_STRYKER_FOLDER ?? 'core'}.json` },
};
