// The lock that lets one `knowledgefs gc --delete` run at a time per store:
// a row of knowledgefs_gc_lock (sql/migrations/002) with a holder and an
// expiry, taken when free or expired, renewed while gc runs, and checked
// before every batch of deletions (a gc that lost it, paused past its
// expiry, stops before deleting more). A gc killed with -9 holds it until
// it expires; the next run then takes it over.
//
// Why a row and not an object in the bucket: a lock object needs a
// conditional PUT (If-None-Match: *), which older S3-compatible stores and
// s3rver ignore, so two gcs could both "take" it. Why not an advisory
// lock: it is released when the connection drops, not at an expiry the
// operator can see, and a pooler in transaction mode breaks it. gc needs
// PostgreSQL anyway to read which publications replicas serve.

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { KnowledgeError } from '../../../core/errors.js';

export interface GcLockHolder {
  readonly holder: string;
  readonly expiresInSeconds: number;
}

export class PgGcLock {
  readonly holder = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private timer: NodeJS.Timeout | null = null;
  private lost: string | null = null;

  private constructor(
    private readonly client: pg.Pool,
    private readonly store: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes the lock for `store`, or throws naming who holds it and until when. */
  static async take(client: pg.Pool, store: string, ttlMs: number): Promise<PgGcLock> {
    const lock = new PgGcLock(client, store, ttlMs);
    const { rows } = await client.query<{ holder: string }>(
      `INSERT INTO knowledgefs_gc_lock AS l (store, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
       ON CONFLICT (store) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
       WHERE l.expires_at < now()
       RETURNING holder`,
      [store, lock.holder, ttlMs / 1000],
    );
    if (rows.length === 0) {
      const other = await PgGcLock.holderOf(client, store);
      throw new KnowledgeError(
        'unavailable',
        `another gc holds the lock on ${store}${other !== null ? ` (${other.holder}, for ${Math.ceil(other.expiresInSeconds)} s more unless it renews it)` : ''}; try again later`,
      );
    }
    lock.timer = setInterval(() => void lock.renew(), Math.max(50, ttlMs / 3));
    lock.timer.unref();
    return lock;
  }

  static async holderOf(client: pg.Pool, store: string): Promise<GcLockHolder | null> {
    const { rows } = await client.query<{ holder: string; left: number }>(
      'SELECT holder, extract(epoch FROM expires_at - now())::float8 AS left FROM knowledgefs_gc_lock WHERE store = $1 AND expires_at > now()',
      [store],
    );
    const row = rows[0];
    return row === undefined ? null : { holder: row.holder, expiresInSeconds: row.left };
  }

  /** Extends the expiry; false (and the lock counts as lost) when another gc took it over. */
  async renew(): Promise<boolean> {
    if (this.lost !== null) return false;
    try {
      const { rowCount } = await this.client.query(
        'UPDATE knowledgefs_gc_lock SET expires_at = now() + make_interval(secs => $3) WHERE store = $1 AND holder = $2 AND expires_at > now()',
        [this.store, this.holder, this.ttlMs / 1000],
      );
      if (rowCount === 0) this.lost = 'it expired and was taken over, or was released';
    } catch (err) {
      // Not known to be lost yet: the next check asks again.
      void err;
      return false;
    }
    return this.lost === null;
  }

  /** Throws unless the lock is still ours (renewed now): called before every batch of deletions. */
  async check(): Promise<void> {
    if (!(await this.renew())) {
      throw new KnowledgeError('unavailable', `gc lost its lock on ${this.store} (${this.lost ?? 'PostgreSQL did not answer'}); stopped before deleting more: run gc again`);
    }
  }

  async release(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.client.query('DELETE FROM knowledgefs_gc_lock WHERE store = $1 AND holder = $2', [this.store, this.holder]).catch(() => undefined);
  }
}
