// Daily partitions of knowledgefs_audit (sql/migrations/002_audit.sql).
// Every replica keeps them: at start and every hour it creates the
// partitions of yesterday, today and the next two days (so a write never
// finds its day missing, even across midnight or with a clock a little off)
// and drops the ones that end before now - retention. Both happen under a
// transaction-level advisory lock, so replicas take turns and the second
// finds the work done; CREATE TABLE IF NOT EXISTS makes a repeat harmless.

import type pg from 'pg';

/** Any fixed number, different from the migration lock; it names the lock replicas take while keeping partitions. */
const PARTITION_LOCK = 74_200_014;
const DAY_MS = 24 * 3600 * 1000;
const PARTITION_NAME = /^knowledgefs_audit_p(\d{4})(\d{2})(\d{2})$/;

function dayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** `knowledgefs_audit_p20261201` for the UTC day holding `ms`. */
export function partitionName(ms: number): string {
  return `knowledgefs_audit_p${new Date(dayStart(ms)).toISOString().slice(0, 10).replace(/-/g, '')}`;
}

export interface PartitionChanges {
  readonly created: string[];
  readonly dropped: string[];
}

export async function keepPartitions(client: pg.ClientBase, now: number, retentionMs: number): Promise<PartitionChanges> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_LOCK]);
    const { rows } = await client.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'knowledgefs_audit'::regclass`,
    );
    const existing = new Set(rows.map((r) => r.name));
    const created: string[] = [];
    for (let d = -1; d <= 2; d++) {
      const from = dayStart(now) + d * DAY_MS;
      const name = partitionName(from);
      if (existing.has(name)) continue;
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF knowledgefs_audit FOR VALUES FROM ('${new Date(from).toISOString()}') TO ('${new Date(from + DAY_MS).toISOString()}')`,
      );
      created.push(name);
    }
    const dropped: string[] = [];
    for (const name of existing) {
      const m = PARTITION_NAME.exec(name);
      if (m === null) continue;
      const end = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) + DAY_MS;
      if (end > now - retentionMs) continue;
      await client.query(`DROP TABLE IF EXISTS ${name}`);
      dropped.push(name);
    }
    await client.query('COMMIT');
    return { created, dropped };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
