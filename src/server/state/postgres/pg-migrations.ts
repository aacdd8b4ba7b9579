// Versioned schema migrations for the PostgreSQL session state, expand and
// contract, so that replicas of two releases can share one database during a
// rolling upgrade.
//
// Plain numbered files `sql/migrations/NNN_name.sql`, applied in order, each
// in its own transaction together with its record. Each file declares its
// kind on a line `-- knowledgefs-migration: expand|contract`:
//
// - expand: only adds what older code ignores (tables, columns with
//   defaults, indexes, functions). Recorded in EXPAND_TABLE, which releases
//   before it do not read, so a replica of the previous release keeps
//   starting and working against the migrated database.
// - contract: removes or changes something an older release uses. Recorded
//   in CONTRACT_TABLE, the table every release since 0.1.0 reads and refuses
//   to start past: a release that does not know a contract step cannot run
//   on it. Applied only when the operator says every replica runs a release
//   that knows it (`contract: true`, `serve --migrate-contract`).
//
// CONTRACT_TABLE therefore means "the level every replica must understand"
// (001 and the contract steps). Builds between 0.1.0 and this scheme recorded
// their expand steps there too; they are moved to EXPAND_TABLE, with the time
// they were applied, the first time a replica of this release starts.
//
// Every replica runs `migrate` at start; a session-level advisory lock makes
// replicas that start together take turns, so the second finds everything
// applied and does nothing.

import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { KnowledgeError } from '../../../core/errors.js';

/** `sql/migrations` of the package (four levels above both src/server/state/postgres and dist/server/state/postgres). */
export const MIGRATIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'sql', 'migrations');

/** What every release reads (0.1.0 refuses to start when it holds a version it does not know): 001 and contract steps. */
export const CONTRACT_TABLE = 'knowledgefs_schema_migrations';
/** Expand steps: releases that do not know one ignore it. */
export const EXPAND_TABLE = 'knowledgefs_schema_expansions';

/** Any fixed number; it names the lock replicas take while migrating (the same in every release). */
const MIGRATION_LOCK = 74_200_013;

const MIGRATION_FILE = /^(\d{3})_[a-z0-9_]+\.sql$/;
const KIND_LINE = /^-- knowledgefs-migration: (\S+)\s*$/m;

export type MigrationKind = 'expand' | 'contract';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly kind: MigrationKind;
  readonly sql: string;
}

export interface MigrateOptions {
  /** Also apply the contract steps this release knows: only once every replica runs a release that knows them. */
  readonly contract?: boolean;
}

export interface MigrationOutcome {
  /** Names applied now, in order. */
  readonly applied: readonly string[];
  /** Those of them that were contract steps (older releases refuse the database now). */
  readonly contracted: readonly string[];
  /** Expand steps an earlier build recorded in CONTRACT_TABLE, moved to EXPAND_TABLE now. */
  readonly moved: readonly string[];
  /** Expand steps a newer release applied: additive, so this one runs beside them. */
  readonly newerExpand: readonly string[];
  /** Contract steps this release knows but did not apply (not allowed yet). */
  readonly pendingContract: readonly string[];
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => MIGRATION_FILE.test(n)).sort();
  const migrations: Migration[] = [];
  for (const name of names) {
    const version = Number(MIGRATION_FILE.exec(name)?.[1]);
    if (migrations.some((m) => m.version === version)) {
      throw new KnowledgeError('internal', `${dir}: two migrations numbered ${version}`);
    }
    const sql = await readFile(join(dir, name), 'utf8');
    const kind = KIND_LINE.exec(sql)?.[1];
    if (kind !== 'expand' && kind !== 'contract') {
      throw new KnowledgeError(
        'internal',
        `${join(dir, name)}: ${kind === undefined ? 'no' : `an unknown kind '${kind}' in its`} "-- knowledgefs-migration: expand|contract" line (expand: only adds what older releases ignore; contract: removes or changes what they use)`,
      );
    }
    migrations.push({ version, name, kind, sql });
  }
  return migrations;
}

interface Recorded {
  readonly version: number;
  readonly name: string;
}

/**
 * Brings the schema to what this release needs: applies pending expand
 * steps (and contract steps when allowed), after moving expand steps an
 * earlier build recorded as contract ones. Refuses, changing nothing, a
 * schema with a contract step this release does not know.
 */
export async function migrate(client: pg.ClientBase, migrations: readonly Migration[], opts: MigrateOptions = {}): Promise<MigrationOutcome> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await createRecordTable(client, CONTRACT_TABLE);
    const byVersion = new Map(migrations.map((m) => [m.version, m]));
    const known = Math.max(0, ...migrations.map((m) => m.version));
    const contractRows = await recorded(client, CONTRACT_TABLE);
    const unknown = contractRows.filter((r) => !byVersion.has(r.version));
    const newest = unknown.sort((a, b) => b.version - a.version)[0];
    if (newest !== undefined) {
      throw new KnowledgeError(
        'config',
        `the session-state schema is at version ${newest.version}, newer than this knowledgefs knows (${known}): contract migration ${newest.name} changed what this release uses; upgrade knowledgefs on this replica`,
      );
    }
    await createRecordTable(client, EXPAND_TABLE);
    const moved = await moveExpandSteps(client, contractRows.filter((r) => byVersion.get(r.version)?.kind === 'expand'));
    const expanded = await recorded(client, EXPAND_TABLE);
    const done = new Set([...contractRows, ...expanded].map((r) => r.version));
    // No replica has used a fresh database yet, so no older release can be broken by a contract step.
    const fresh = done.size === 0;
    const applied: string[] = [];
    const contractedNow: string[] = [];
    const pendingContract: string[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      if (m.kind === 'contract' && !fresh && opts.contract !== true) {
        pendingContract.push(m.name);
        continue;
      }
      await apply(client, m);
      done.add(m.version);
      applied.push(m.name);
      if (m.kind === 'contract') contractedNow.push(m.name);
    }
    const newerExpand = expanded.filter((r) => !byVersion.has(r.version)).map((r) => r.name);
    return { applied, contracted: contractedNow, moved, newerExpand, pendingContract };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
  }
}

async function createRecordTable(client: pg.ClientBase, table: string): Promise<void> {
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${table} (
       version integer PRIMARY KEY,
       name text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  );
}

async function recorded(client: pg.ClientBase, table: string): Promise<Recorded[]> {
  return (await client.query<Recorded>(`SELECT version, name FROM ${table} ORDER BY version`)).rows;
}

/** One transaction: each record copied with the time it was applied, then removed from CONTRACT_TABLE. */
async function moveExpandSteps(client: pg.ClientBase, steps: readonly Recorded[]): Promise<string[]> {
  if (steps.length === 0) return [];
  const versions = steps.map((s) => s.version);
  await client.query('BEGIN');
  try {
    await client.query(
      `INSERT INTO ${EXPAND_TABLE} (version, name, applied_at)
       SELECT version, name, applied_at FROM ${CONTRACT_TABLE} WHERE version = ANY ($1::integer[])
       ON CONFLICT (version) DO NOTHING`,
      [versions],
    );
    await client.query(`DELETE FROM ${CONTRACT_TABLE} WHERE version = ANY ($1::integer[])`, [versions]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new KnowledgeError('unavailable', `moving expand migrations to ${EXPAND_TABLE} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return steps.map((s) => s.name);
}

async function apply(client: pg.ClientBase, m: Migration): Promise<void> {
  const table = m.kind === 'contract' ? CONTRACT_TABLE : EXPAND_TABLE;
  await client.query('BEGIN');
  try {
    await client.query(m.sql);
    await client.query(`INSERT INTO ${table} (version, name) VALUES ($1, $2)`, [m.version, m.name]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new KnowledgeError('unavailable', `migration ${m.name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** What a replica logs about a migration run: what it applied or moved, and what it leaves to the operator. */
export function migrationLogLines(outcome: MigrationOutcome): string[] {
  const lines: string[] = [];
  if (outcome.moved.length > 0) {
    lines.push(`moved the record of expand migrations ${outcome.moved.join(', ')} from ${CONTRACT_TABLE} to ${EXPAND_TABLE} (replicas of 0.1.0 start beside them now)`);
  }
  if (outcome.applied.length > 0) {
    const kinds = outcome.applied.map((name) => `${name} (${outcome.contracted.includes(name) ? 'contract' : 'expand'})`);
    lines.push(`applied migrations ${kinds.join(', ')}`);
  }
  if (outcome.newerExpand.length > 0) {
    lines.push(`the schema has expand migrations newer than this release (${outcome.newerExpand.join(', ')}): they only add what this release ignores; starting`);
  }
  if (outcome.pendingContract.length > 0) {
    lines.push(
      `contract migrations ${outcome.pendingContract.join(', ')} not applied: once every replica runs this release, restart one with --migrate-contract (replicas of older releases refuse to start after it)`,
    );
  }
  return lines;
}
