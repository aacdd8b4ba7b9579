// Which publications a `serve --store` replica serves, recorded in
// PostgreSQL (knowledgefs_replicas, sql/migrations/002) for `knowledgefs gc`:
// every --state-heartbeat (no more often than once a second), and at once
// when it switches, the replica upserts one
// row per publication it serves (its current one, and the previous one it
// still answers opens for) with heartbeat_at = now(). gc keeps every
// publication whose heartbeat is within its grace, so a replica stuck on an
// old publication (refusing newer ones, or cut off from the bucket) keeps
// it alive; a replica that stops beating lets it go after the grace.
//
// Times are PostgreSQL's own now(), so clocks of replicas and of gc never
// have to agree. A failed heartbeat is logged once and tried again; it does
// not affect serving (the grace is hours, a heartbeat seconds).

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { parsePointer, serializePointer, type Pointer } from '../../../core/publication.js';
import { sha256Hex } from '../../../core/sha256.js';
import { pgErrorText } from './pg-error-text.js';
import { redactUrl } from './pg-state-url.js';

export const REPLICA_HEARTBEAT_MS = 5_000;

/** sha256 of the pointer's bytes: how a publication is named in the table and in gc's output. */
export function publicationId(pointer: Pointer): string {
  return sha256Hex(serializePointer(pointer));
}

export interface ReplicaHeartbeatOptions {
  readonly url: string;
  /** The publications served now (current first); read at every beat. */
  readonly served: () => readonly Pointer[];
  readonly log: (line: string) => void;
  readonly intervalMs?: number;
  readonly timeoutMs?: number;
}

export class PgReplicaHeartbeat {
  readonly replicaId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly pool: pg.Pool;
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private failing = false;

  constructor(private readonly opts: ReplicaHeartbeatOptions) {
    const timeoutMs = opts.timeoutMs ?? 5_000;
    this.pool = new pg.Pool({ connectionString: opts.url, max: 1, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, application_name: 'knowledgefs-replica' });
    this.pool.on('error', () => undefined);
  }

  /** The first beat (awaited, errors logged), then one every interval. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.opts.intervalMs ?? REPLICA_HEARTBEAT_MS);
    this.timer.unref();
  }

  /** One upsert of every publication served; concurrent calls share one. */
  beat(): Promise<void> {
    this.beating ??= this.write().finally(() => (this.beating = null));
    return this.beating;
  }

  private async write(): Promise<void> {
    const served = this.opts.served();
    if (served.length === 0) return;
    try {
      await this.pool.query(
        `INSERT INTO knowledgefs_replicas (replica_id, publication, pointer, heartbeat_at)
         SELECT $1, p.id, p.pointer, now() FROM unnest($2::text[], $3::jsonb[]) AS p(id, pointer)
         ON CONFLICT (replica_id, publication) DO UPDATE SET heartbeat_at = now()`,
        [this.replicaId, served.map(publicationId), served.map((p) => JSON.stringify(p))],
      );
      if (this.failing) this.opts.log('publication heartbeat: PostgreSQL answers again');
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.opts.log(`publication heartbeat: cannot record the publications served in PostgreSQL at ${redactUrl(this.opts.url)}: ${pgErrorText(err)} (retrying)`);
      this.failing = true;
    }
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.beating;
    await this.pool.end().catch(() => undefined);
  }
}

export interface ServedPublication {
  readonly id: string;
  readonly pointer: Pointer;
  readonly replicas: number;
  /** Seconds since the newest heartbeat, by PostgreSQL's clock. */
  readonly ageSeconds: number;
}

/** Every publication some replica served within `graceMs` (rows whose pointer does not parse are skipped, named in `log`). */
export async function servedWithin(client: pg.ClientBase | pg.Pool, graceMs: number, log: (line: string) => void): Promise<ServedPublication[]> {
  const { rows } = await client.query<{ publication: string; pointer: unknown; replicas: string; age: number }>(
    `SELECT publication, (array_agg(pointer))[1] AS pointer, count(*) AS replicas,
            extract(epoch FROM now() - max(heartbeat_at))::float8 AS age
     FROM knowledgefs_replicas WHERE heartbeat_at > now() - make_interval(secs => $1)
     GROUP BY publication`,
    [graceMs / 1000],
  );
  const served: ServedPublication[] = [];
  for (const row of rows) {
    try {
      served.push({ id: row.publication, pointer: parsePointer(Buffer.from(JSON.stringify(row.pointer)), `knowledgefs_replicas ${row.publication}`), replicas: Number(row.replicas), ageSeconds: row.age });
    } catch (err) {
      log(`warning: ${err instanceof Error ? err.message : String(err)}; ignored`);
    }
  }
  return served;
}
