import { defineConfig } from 'vitest/config';

// FUSE tests mount real filesystems and spawn real shell tools; they are slow
// to start and must not overload a 2-core machine, so files run one by one.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
