// Versioned schema migrations for the PostgreSQL session state.
//
// Plain numbered files `sql/migrations/NNN_name.sql`, applied in order, each
// in its own transaction together with its row in
// `knowledgefs_schema_migrations`. Every replica runs `migrate` at start;
// a session-level advisory lock makes replicas that start together take
// turns, so the second finds everything applied and does nothing. A schema
// newer than this release knows (a later release already migrated it) is
// refused at start instead of being used half-understood.

import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { KnowledgeError } from '../../../core/errors.js';

/** `sql/migrations` of the package (four levels above both src/server/state/postgres and dist/server/state/postgres). */
export const MIGRATIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'sql', 'migrations');

/** Any fixed number; it names the lock replicas take while migrating. */
const MIGRATION_LOCK = 74_200_013;

const MIGRATION_FILE = /^(\d{3})_[a-z0-9_]+\.sql$/;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => MIGRATION_FILE.test(n)).sort();
  const migrations: Migration[] = [];
  for (const name of names) {
    const version = Number(MIGRATION_FILE.exec(name)?.[1]);
    if (migrations.some((m) => m.version === version)) {
      throw new KnowledgeError('internal', `${dir}: two migrations numbered ${version}`);
    }
    migrations.push({ version, name, sql: await readFile(join(dir, name), 'utf8') });
  }
  return migrations;
}

/** Applies the migrations the database lacks; returns the names applied (empty when up to date). */
export async function migrate(client: pg.ClientBase, migrations: readonly Migration[]): Promise<string[]> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await client.query(
      `CREATE TABLE IF NOT EXISTS knowledgefs_schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>('SELECT version FROM knowledgefs_schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    const known = Math.max(0, ...migrations.map((m) => m.version));
    const newest = Math.max(0, ...done);
    if (newest > known) {
      throw new KnowledgeError(
        'config',
        `the session-state schema is at version ${newest}, newer than this knowledgefs knows (${known}): upgrade knowledgefs on this replica`,
      );
    }
    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO knowledgefs_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new KnowledgeError('unavailable', `migration ${m.name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
      applied.push(m.name);
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
  }
}
