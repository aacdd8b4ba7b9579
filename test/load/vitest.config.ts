import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `npm run test:load`: 200 sessions against one control plane and 50
// concurrent readers on one mount, with memory bounds. Too long for
// `npm test`. Same rules as the main config: real processes and mounts,
// files one by one.
export default defineConfig({
  root: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  test: {
    include: ['test/load/**/*.load.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
