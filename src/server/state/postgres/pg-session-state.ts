// Session state in PostgreSQL, shared by every control-plane replica.
//
// Writes: each acknowledgement is one statement in autocommit (one round
// trip): it changes the session, bumps the session's `version`, and
// `pg_notify`s the change on CHANNEL in the same transaction, so every
// replica hears of it once it is committed and never before.
//
// Reads: each replica caches the sessions it has served (pg-session-cache.ts)
// and answers authentication, plans, grants and file reads from that cache
// without a round trip. The cache is kept current by LISTEN on a dedicated
// connection (pg-notification-listener.ts), and used only while that
// connection's heartbeat confirms it: so a revocation committed at time R is
// honoured by every replica by R + 2 × heartbeatMs, or that replica refuses
// the token.

import pg from 'pg';
import { KnowledgeError } from '../../../core/errors.js';
import { loadMigrations, migrate, migrationLogLines } from './pg-migrations.js';
import { pgErrorText } from './pg-error-text.js';
import { PgNotificationListener } from './pg-notification-listener.js';
import { PgSessionCache } from './pg-session-cache.js';
import { CHANNEL, changePayload, parseNotification, type PgChange, type Update } from './pg-session-changes.js';
import { INSERT_SESSION, SELECT_SESSION, type SessionRow } from './pg-session-rows.js';
import { redactUrl } from './pg-state-url.js';
import { hashToken, holdsToken, MAX_READ_SET, newSession } from '../session-record.js';
import type { NewSession, ReadSetEntry, SessionRecord, SessionState, SessionStats } from '../session-state.js';

/** How often the session counts for metrics are refreshed (a count over every session is not free). */
const STATS_EVERY_MS = 10_000;

export interface PgStateOptions {
  /** postgres://… connection string (may carry the password: it is never logged). */
  readonly url: string;
  /** Pause between heartbeats of the listening connection; revocations are honoured within twice this. */
  readonly heartbeatMs: number;
  readonly log: (line: string) => void;
  /** Longest a connection attempt or a query may take before the request fails with 503. Default 5 s. */
  readonly timeoutMs?: number;
  /** Connections for queries. Default 10. */
  readonly poolSize?: number;
  /** Called once per query a request (or a reload it caused) sends: the round-trips metric. */
  readonly onRoundTrip?: () => void;
  /** Sessions cached per replica. Default 100 000. */
  readonly maxCached?: number;
  readonly now?: () => number;
  /** Also apply contract migrations (`serve --migrate-contract`): only once every replica runs this release. */
  readonly migrateContract?: boolean;
}

export class PgSessionState implements SessionState {
  private readonly pool: pg.Pool;
  private readonly cache: PgSessionCache;
  private readonly listener: PgNotificationListener;
  private timer: NodeJS.Timeout | null = null;
  private lastStats: SessionStats = { team: 0, personal: 0, mountedTeams: 0 };
  private statsAt = -Infinity;
  private closed = false;
  private readonly now: () => number;
  readonly where: string;

  private constructor(private readonly opts: PgStateOptions) {
    this.now = opts.now ?? Date.now;
    const timeoutMs = opts.timeoutMs ?? 5_000;
    this.where = redactUrl(opts.url);
    this.pool = new pg.Pool({
      connectionString: opts.url,
      max: opts.poolSize ?? 10,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      idleTimeoutMillis: 30_000,
      application_name: 'knowledgefs',
    });
    // An idle connection that breaks must not crash the process; the next query reconnects.
    this.pool.on('error', (err) => opts.log(`session state: a PostgreSQL connection failed: ${pgErrorText(err)}`));
    this.cache = new PgSessionCache({ max: opts.maxCached ?? 100_000, query: (text, values) => this.query(text, values), log: opts.log });
    this.listener = new PgNotificationListener({
      url: opts.url,
      where: this.where,
      heartbeatMs: opts.heartbeatMs,
      timeoutMs,
      now: this.now,
      log: opts.log,
      onNotification: (payload) => {
        const notified = parseNotification(payload);
        if (notified !== undefined) this.cache.notify(notified);
      },
      onListening: () => this.cache.reloadAll(),
    });
  }

  /** Connects, migrates the schema, starts listening. PostgreSQL unreachable → KnowledgeError('unavailable'). */
  static async open(opts: PgStateOptions): Promise<PgSessionState> {
    const state = new PgSessionState(opts);
    try {
      const migrations = await loadMigrations();
      let client: pg.PoolClient;
      try {
        client = await state.pool.connect();
      } catch (err) {
        throw new KnowledgeError('unavailable', `session state: cannot connect to PostgreSQL at ${state.where}: ${pgErrorText(err)}`, { cause: err });
      }
      try {
        const outcome = await migrate(client, migrations, { contract: opts.migrateContract === true });
        for (const line of migrationLogLines(outcome)) opts.log(`session state: ${line}`);
      } finally {
        client.release();
      }
      await state.listener.listen();
      await state.refreshStats();
    } catch (err) {
      await state.close();
      if (err instanceof KnowledgeError) throw err;
      throw new KnowledgeError('unavailable', `session state: PostgreSQL at ${state.where}: ${pgErrorText(err)}`, { cause: err });
    }
    state.timer = setInterval(() => void state.heartbeat(), opts.heartbeatMs);
    state.timer.unref();
    return state;
  }

  async describe(): Promise<string> {
    const { rows } = await this.query<{ n: string }>('SELECT count(*) AS n FROM knowledgefs_sessions WHERE NOT revoked');
    return `${rows[0]?.n ?? 0} live sessions in PostgreSQL at ${this.where}`;
  }

  stats(): SessionStats {
    return this.lastStats;
  }

  private async refreshStats(): Promise<void> {
    this.statsAt = this.now();
    const { rows } = await this.query<{ team: string; personal: string; mounted: string }>(
      `SELECT count(*) FILTER (WHERE kind = 'team') AS team, count(*) FILTER (WHERE kind = 'personal') AS personal,
              coalesce(sum(cardinality(mounted)), 0) AS mounted
       FROM knowledgefs_sessions WHERE NOT revoked`,
      [],
      true,
    );
    const row = rows[0];
    if (row !== undefined) this.lastStats = { team: Number(row.team), personal: Number(row.personal), mountedTeams: Number(row.mounted) };
  }

  cached(id: string): SessionRecord | undefined {
    return this.cache.peek(id);
  }

  async find(id: string): Promise<SessionRecord | undefined> {
    await this.ensureTrusted();
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached.record;
    const { rows } = await this.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = $1`, [id]);
    const row = rows[0];
    return row === undefined ? undefined : this.cache.adopt(row).record;
  }

  onChange(listener: (sessionId: string) => void): () => void {
    return this.cache.onChange(listener);
  }

  async authenticate(token: string): Promise<SessionRecord | null> {
    await this.ensureTrusted();
    const hash = hashToken(token);
    let entry = this.cache.byToken(hash);
    if (entry === undefined) {
      const entryFound = await this.cache.loadByToken(hash);
      if (entryFound === null) return null;
      entry = entryFound;
    }
    if (!holdsToken(entry.record, hash)) return null;
    return entry.record.revoked ? null : entry.record;
  }

  async create(input: NewSession, createdAt: string): Promise<{ record: SessionRecord; token: string }> {
    const { record, token } = newSession(input, createdAt);
    const created: PgChange = { kind: 'created', tokenHash: record.tokenHash };
    await this.query(INSERT_SESSION, [record.id, record.tokenHash, record.kind, record.creator, record.team ?? null, createdAt, JSON.stringify(created)]);
    this.cache.remember({ record, version: 0, reloading: false, reloadAgain: false });
    return { record, token };
  }

  async revoke(id: string): Promise<boolean> {
    const change: PgChange = { kind: 'revoke' };
    const { rows } = await this.query<{ version: string | null; found: boolean }>(
      `WITH s AS (
         UPDATE knowledgefs_sessions SET revoked = true, version = version + 1 WHERE id = $1 AND NOT revoked RETURNING version
       )
       SELECT (SELECT version FROM s) AS version,
              EXISTS (SELECT 1 FROM knowledgefs_sessions WHERE id = $1) AS found,
              (SELECT pg_notify('${CHANNEL}', $1 || ' ' || version || ' ' || $2) FROM s) AS notified`,
      [id, JSON.stringify(change)],
    );
    const row = rows[0];
    if (row === undefined || !row.found) return false;
    const entry = this.cache.peekEntry(id);
    if (entry !== undefined && row.version !== null) this.cache.advance(entry, Number(row.version), change);
    return true;
  }

  async recordRead(record: SessionRecord, entry: ReadSetEntry, mountTeam: string | null): Promise<boolean> {
    const mounts = mountTeam !== null && !record.mounted.includes(mountTeam);
    // Already in the cached read set, so already committed: nothing to write.
    if (!mounts && record.readSet.some((e) => e.path === entry.path && e.sha256 === entry.sha256)) return false;
    const change: PgChange = { kind: 'read', entry, ...(mounts ? { mount: mountTeam } : {}) };
    // One round trip (sql/migrations): lock, mount, upsert the entry, trim to MAX_READ_SET, notify.
    const { rows } = await this.query<{ version: string; newly: boolean }>('SELECT * FROM knowledgefs_record_read($1, $2, $3, $4, $5, $6)', [
      record.id,
      entry.path,
      entry.sha256,
      mounts ? mountTeam : null,
      record.readSet.length >= MAX_READ_SET - 1 ? MAX_READ_SET : null,
      changePayload(change),
    ]);
    const row = rows[0];
    if (row === undefined) throw new KnowledgeError('unavailable', `session ${record.id} is not in the session state`);
    this.cache.advance(this.cache.entryFor(record), Number(row.version), change);
    return row.newly;
  }

  async replaceReadSet(record: SessionRecord, next: ReadSetEntry[]): Promise<void> {
    const wanted = new Map(next.map((e) => [e.path, e.sha256]));
    const updates: Update[] = [];
    for (const e of record.readSet) {
      const sha256 = wanted.get(e.path);
      if (sha256 !== e.sha256) updates.push([e.path, e.sha256, sha256 ?? null]);
    }
    if (updates.length === 0) return;
    const change: PgChange = { kind: 'reminded', updates };
    // Each update holds only if the entry is still the one the reminder saw: a newer read wins.
    // The read-set changes join `s`, so the session row is locked first, as a read locks it
    // (knowledgefs_record_read): the same order, so the two never deadlock.
    const { rows } = await this.query<{ version: string }>(
      `WITH s AS (
         UPDATE knowledgefs_sessions SET version = version + 1 WHERE id = $1 RETURNING version
       ), c AS (
         SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS c(path, old, next)
       ), u AS (
         UPDATE knowledgefs_read_set r SET sha256 = c.next FROM c, s
         WHERE r.session_id = $1 AND r.path = c.path AND r.sha256 = c.old AND c.next IS NOT NULL
       ), d AS (
         DELETE FROM knowledgefs_read_set r USING c, s
         WHERE r.session_id = $1 AND r.path = c.path AND r.sha256 = c.old AND c.next IS NULL
       )
       SELECT s.version, pg_notify('${CHANNEL}', $1 || ' ' || s.version || ' ' || $5) AS notified FROM s`,
      [record.id, updates.map((u) => u[0]), updates.map((u) => u[1]), updates.map((u) => u[2]), changePayload(change)],
    );
    const row = rows[0];
    if (row === undefined) throw new KnowledgeError('unavailable', `session ${record.id} is not in the session state`);
    this.cache.advance(this.cache.entryFor(record), Number(row.version), change);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.listener.close();
    await this.pool.end().catch(() => undefined);
  }

  private async ensureTrusted(): Promise<void> {
    if (this.closed) throw new KnowledgeError('unavailable', 'session state: closing');
    await this.listener.ensureTrusted();
  }

  private async heartbeat(): Promise<void> {
    if (this.closed || this.listener.beating) return;
    await this.listener.confirm();
    if (this.now() - this.statsAt >= STATS_EVERY_MS) await this.refreshStats().catch(() => undefined);
  }

  /** One round trip; `background` ones (the session-count refresh) are not counted as a request's. */
  private async query<R extends pg.QueryResultRow>(text: string, values?: unknown[], background = false): Promise<pg.QueryResult<R>> {
    if (!background) this.opts.onRoundTrip?.();
    try {
      return await this.pool.query<R>(text, values);
    } catch (err) {
      if (err instanceof KnowledgeError) throw err;
      // The details name where PostgreSQL is: they go to the log, never to the client.
      this.opts.log(`session state: a query to PostgreSQL at ${this.where} failed: ${pgErrorText(err)}`);
      throw new KnowledgeError('unavailable', 'session state unavailable: a query to PostgreSQL failed; retry shortly', { cause: err });
    }
  }
}
