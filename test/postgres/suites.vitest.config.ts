import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The existing server, read-tool and mount suites again, with every control
// plane they start keeping its sessions in PostgreSQL (a fresh database
// each) instead of a state file: CanLoadScope, membership per request,
// existence hiding, guidance, the audit trail and the mount behave the same
// in both modes. Suites about the state file itself are not in the list.
export default defineConfig({
  root: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  test: {
    include: [
      'test/server-access.test.ts',
      'test/server-read.test.ts',
      'test/server-membership.test.ts',
      'test/server-batch.test.ts',
      'test/server-explain.test.ts',
      'test/server-request-id.test.ts',
      'test/server-long-poll.test.ts',
      'test/server-packs.test.ts',
      'test/server-smoke.test.ts',
      'test/e2e-read.test.ts',
      'test/mount-visibility.test.ts',
      'test/mount-sync.test.ts',
      'test/hostile/token-misuse.test.ts',
      'test/hostile/read-tool-fuzz.test.ts',
      'test/hostile/files-path-fuzz.test.ts',
    ],
    globalSetup: ['test/postgres/state-pg-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    pool: 'forks',
  },
});
