// Global setup of the suites `npm run test:postgres` runs again with session
// state in PostgreSQL: one throwaway cluster for the run, named to the test
// helpers by $KNOWLEDGEFS_TEST_STATE_PG (each control plane gets a fresh
// database on it), removed at the end.

import { TEST_STATE_PG_ENV } from '../helpers/control-plane.js';
import { startPostgres } from '../helpers/postgres.js';

export default async function setup(): Promise<() => Promise<void>> {
  const cluster = await startPostgres();
  process.env[TEST_STATE_PG_ENV] = cluster.url('postgres');
  return async () => {
    delete process.env[TEST_STATE_PG_ENV];
    try {
      // A run in which no control plane used PostgreSQL proved nothing about it.
      const [row] = await cluster.sql<{ n: string }>("SELECT count(*) AS n FROM pg_database WHERE datname LIKE 'kfs\\_%'");
      const used = Number(row?.n ?? 0);
      process.stderr.write(`session state in PostgreSQL: ${used} control planes\n`);
      if (used === 0) throw new Error(`no control plane kept its state in PostgreSQL: is $${TEST_STATE_PG_ENV} reaching the test helpers?`);
    } finally {
      await cluster.destroy();
    }
  };
}
