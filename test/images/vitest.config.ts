import { defineConfig } from 'vitest/config';

// `npm run test:images`: builds docker/Dockerfile's images with podman and
// runs them (one file; builds take minutes on a busy 2-core machine).
export default defineConfig({
  test: {
    include: ['test/images/**/*.image.ts'],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
