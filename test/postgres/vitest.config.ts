import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `npm run test:postgres`: the scale-out suites, each against a real
// PostgreSQL cluster it starts in a temp dir (test/helpers/postgres.ts).
// Files run one by one, like every suite with real processes.
export default defineConfig({
  root: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  test: {
    include: ['test/postgres/**/*.pg.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
