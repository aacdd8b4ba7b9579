import { defineConfig } from 'vitest/config';

// `npm run test:artifacts`: the npm tarball as a platform team gets it: packed
// from a clean clone of HEAD, installed with `npm i -g` in a podman container
// without a compiler, Python or libfuse 2, and run there (one file).
export default defineConfig({
  test: {
    include: ['test/artifacts/**/*.artifact.ts'],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
