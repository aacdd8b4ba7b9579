import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `npm run test:faults`: the long fault suites (crashes under load, 32
// concurrent readers) that do not fit in `npm test`'s time budget. Same
// rules as the main config: real processes and mounts, files one by one.
export default defineConfig({
  root: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  test: {
    include: ['test/faults/**/*.fault.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
