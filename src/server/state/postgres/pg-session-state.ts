// Session state in PostgreSQL, shared by every control-plane replica.
//
// Writes: each acknowledgement is one statement in autocommit (one round
// trip): it changes the session, bumps the session's `version`, and
// `pg_notify`s the change on CHANNEL in the same transaction, so every
// replica hears of it once it is committed and never before.
//
// Reads: each replica caches the sessions it has served (bounded LRU) and
// answers authentication, plans, grants and file reads from that cache
// without a round trip. The cache is kept current by LISTEN on a dedicated
// connection: a notified change is applied when its version is the next one
// of the cached session, skipped when already applied, and a gap (or a
// change too big for a notification) reloads the session. Records are
// updated in place, so long-polls holding one see mounts and revocations.
//
// Trust bound: the listening connection runs a heartbeat query every
// `heartbeatMs`. A heartbeat that started at time T and completed proves
// that every notification committed before T has been received (PostgreSQL
// sends pending notifications before answering a query). The cache is used
// only while such a T lies within `2 × heartbeatMs` of now. Past that, a
// request that needs a session first runs a heartbeat itself (one, shared
// by every request waiting: a replica too busy to run the timer's on time
// is not down); if that fails, or the listening connection is gone, it is
// refused with `unavailable` (503 with Retry-After) until the connection is
// back and every cached session has been reloaded. So a revocation
// committed at time R is honoured by every replica by R + 2 × heartbeatMs,
// or that replica refuses the token.

import pg from 'pg';
import { LRUCache } from 'lru-cache';
import { KnowledgeError } from '../../../core/errors.js';
import type { SessionKind } from '../../../core/session/policy.js';
import { loadMigrations, migrate } from './pg-migrations.js';
import { applyRead, hashToken, holdsToken, MAX_READ_SET, newSession } from '../session-record.js';
import type { NewSession, ReadSetEntry, SessionRecord, SessionState, SessionStats } from '../session-state.js';

export const CHANNEL = 'knowledgefs_sessions';
/** How often the session counts for metrics are refreshed (a count over every session is not free). */
const STATS_EVERY_MS = 10_000;
/** PostgreSQL refuses notification payloads of 8000 bytes or more; bigger changes are sent as "reload". */
const MAX_PAYLOAD = 7_900;
/** Sessions read back per query after the notification connection was lost (read sets included). */
const RELOAD_BATCH = 100;

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
}

type Update = [path: string, old: string, next: string | null];

/** A change as notified to the replicas; applied to a cached session in version order. */
type PgChange =
  | { readonly kind: 'revoke' }
  | { readonly kind: 'read'; readonly entry: ReadSetEntry; readonly mount?: string }
  | { readonly kind: 'reminded'; readonly updates: Update[] }
  | { readonly kind: 'reload' };

interface Cached {
  readonly record: SessionRecord;
  /** The session version `record` reflects. */
  version: number;
  reloading: boolean;
  reloadAgain: boolean;
}

interface SessionRow {
  id: string;
  token_hash: string;
  kind: SessionKind;
  creator: string;
  team: string | null;
  revoked: boolean;
  mounted: string[];
  created_at: string;
  version: string;
  read_set: [string, string][];
}

const SELECT_SESSION = `
  SELECT s.*, coalesce((SELECT json_agg(json_build_array(r.path, r.sha256) ORDER BY r.read_order)
                        FROM knowledgefs_read_set r WHERE r.session_id = s.id), '[]') AS read_set
  FROM knowledgefs_sessions s`;

/** The URL with its password (if any) removed: what logs and errors may show. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '';
    return u.toString().replace(/^(postgres(?:ql)?:\/\/[^:@/]*):?@/, '$1@');
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message || err.constructor.name : String(err);
}

function applyChange(record: SessionRecord, change: PgChange): void {
  if (change.kind === 'revoke') {
    record.revoked = true;
  } else if (change.kind === 'read') {
    applyRead(record, { ...change.entry }, change.mount);
  } else if (change.kind === 'reminded') {
    // One pass over the read set (paths are unique in it and in the updates): a reminder may change thousands.
    const updates = new Map(change.updates.map(([path, old, sha256]) => [path, { old, sha256 }]));
    const next: ReadSetEntry[] = [];
    for (const e of record.readSet) {
      const u = updates.get(e.path);
      if (u === undefined || u.old !== e.sha256) next.push(e);
      else if (u.sha256 !== null) next.push({ path: e.path, sha256: u.sha256 });
    }
    record.readSet = next;
  }
}

/** Brings a cached session in place to what a row just read says. */
function refresh(entry: Cached, row: SessionRow): void {
  const fresh = recordOf(row);
  entry.record.revoked = fresh.revoked;
  entry.record.mounted = fresh.mounted;
  entry.record.readSet = fresh.readSet;
  entry.version = Number(row.version);
}

function recordOf(row: SessionRow): SessionRecord {
  return {
    id: row.id,
    kind: row.kind,
    creator: row.creator,
    ...(row.team !== null ? { team: row.team } : {}),
    tokenHash: row.token_hash,
    revoked: row.revoked,
    mounted: [...row.mounted],
    readSet: row.read_set.map(([path, sha256]) => ({ path, sha256 })),
    createdAt: row.created_at,
  };
}

export class PgSessionState implements SessionState {
  private readonly pool: pg.Pool;
  private readonly byId: LRUCache<string, Cached>;
  private readonly idByToken = new Map<string, string>();
  /** Every record handed out, cached or evicted since: origin writes update it in place. */
  private readonly entryOf = new WeakMap<SessionRecord, Cached>();
  /** Highest version notified per session, cached or not: a load that raced a change reloads. */
  private readonly notified = new LRUCache<string, number>({ max: 100_000 });
  private readonly loading = new Map<string, Promise<Cached | null>>();
  private readonly listeners = new Set<(sessionId: string) => void>();
  private listener: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  /** Start time of the last heartbeat completed on a listening connection. */
  private confirmedAt = -Infinity;
  private lostReason = 'not connected yet';
  private timer: NodeJS.Timeout | null = null;
  /** The heartbeat in flight (timer or on demand); callers share it. */
  private confirming: Promise<void> | null = null;
  private lastStats: SessionStats = { team: 0, personal: 0, mountedTeams: 0 };
  private statsAt = -Infinity;
  private closed = false;
  private readonly now: () => number;
  private readonly timeoutMs: number;
  readonly where: string;

  private constructor(private readonly opts: PgStateOptions) {
    this.now = opts.now ?? Date.now;
    this.timeoutMs = opts.timeoutMs ?? 5_000;
    this.where = redactUrl(opts.url);
    this.pool = new pg.Pool({
      connectionString: opts.url,
      max: opts.poolSize ?? 10,
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
      idleTimeoutMillis: 30_000,
      application_name: 'knowledgefs',
    });
    // An idle connection that breaks must not crash the process; the next query reconnects.
    this.pool.on('error', (err) => opts.log(`session state: a PostgreSQL connection failed: ${message(err)}`));
    this.byId = new LRUCache<string, Cached>({
      max: opts.maxCached ?? 100_000,
      dispose: (entry, id) => {
        if (this.idByToken.get(entry.record.tokenHash) === id) this.idByToken.delete(entry.record.tokenHash);
      },
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
        throw new KnowledgeError('unavailable', `session state: cannot connect to PostgreSQL at ${state.where}: ${message(err)}`, { cause: err });
      }
      try {
        const applied = await migrate(client, migrations);
        if (applied.length > 0) opts.log(`session state: applied migrations ${applied.join(', ')}`);
      } finally {
        client.release();
      }
      await state.listen();
      await state.refreshStats();
    } catch (err) {
      await state.close();
      if (err instanceof KnowledgeError) throw err;
      throw new KnowledgeError('unavailable', `session state: PostgreSQL at ${state.where}: ${message(err)}`, { cause: err });
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
    return this.byId.peek(id)?.record;
  }

  async find(id: string): Promise<SessionRecord | undefined> {
    await this.ensureTrusted();
    const cached = this.byId.get(id);
    if (cached !== undefined) return cached.record;
    const { rows } = await this.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = $1`, [id]);
    const row = rows[0];
    return row === undefined ? undefined : this.adopt(row).record;
  }

  onChange(listener: (sessionId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async authenticate(token: string): Promise<SessionRecord | null> {
    await this.ensureTrusted();
    const hash = hashToken(token);
    const id = this.idByToken.get(hash);
    let entry = id === undefined ? undefined : this.byId.get(id);
    if (entry === undefined) {
      const entryFound = await this.loadByToken(hash);
      if (entryFound === null) return null;
      entry = entryFound;
    }
    if (!holdsToken(entry.record, hash)) return null;
    return entry.record.revoked ? null : entry.record;
  }

  async create(input: NewSession, createdAt: string): Promise<{ record: SessionRecord; token: string }> {
    const { record, token } = newSession(input, createdAt);
    await this.query(
      'INSERT INTO knowledgefs_sessions (id, token_hash, kind, creator, team, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [record.id, record.tokenHash, record.kind, record.creator, record.team ?? null, createdAt],
    );
    this.remember({ record, version: 0, reloading: false, reloadAgain: false });
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
    const entry = this.byId.peek(id);
    if (entry !== undefined && row.version !== null) this.advance(entry, Number(row.version), change);
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
      this.payload(change),
    ]);
    const row = rows[0];
    if (row === undefined) throw new KnowledgeError('unavailable', `session ${record.id} is not in the session state`);
    this.advance(this.entryFor(record), Number(row.version), change);
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
      [record.id, updates.map((u) => u[0]), updates.map((u) => u[1]), updates.map((u) => u[2]), this.payload(change)],
    );
    const row = rows[0];
    if (row === undefined) throw new KnowledgeError('unavailable', `session ${record.id} is not in the session state`);
    this.advance(this.entryFor(record), Number(row.version), change);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }

  // --- cache ---------------------------------------------------------------

  private fresh(): boolean {
    return this.now() - this.confirmedAt <= 2 * this.opts.heartbeatMs;
  }

  /**
   * The cache may answer only while a heartbeat confirmed it within the
   * bound. A replica too busy to run its heartbeat on time (a burst of
   * requests holding the event loop) confirms on demand: one heartbeat on
   * the listening connection, shared by every request waiting for it, which
   * also delivers any notification still unread. Without a listening
   * connection, or when that heartbeat fails, the request is refused.
   */
  private async ensureTrusted(): Promise<void> {
    if (this.closed) throw new KnowledgeError('unavailable', 'session state: closing');
    // Twice: a heartbeat already in flight may have started before the bound.
    for (let i = 0; i < 2 && !this.fresh() && this.listener !== null; i++) await this.confirm();
    if (this.fresh()) return;
    throw new KnowledgeError('unavailable', `session state unavailable: lost contact with PostgreSQL at ${this.where} (${this.lostReason}); retry shortly`);
  }

  private remember(entry: Cached): Cached {
    this.byId.set(entry.record.id, entry);
    this.idByToken.set(entry.record.tokenHash, entry.record.id);
    this.entryOf.set(entry.record, entry);
    return entry;
  }

  private entryFor(record: SessionRecord): Cached {
    const entry = this.entryOf.get(record);
    if (entry !== undefined) return entry;
    return this.remember({ record, version: -1, reloading: false, reloadAgain: false });
  }

  /** Caches a session row just read (unless another path cached it meanwhile: that one record is kept). */
  private adopt(row: SessionRow): Cached {
    const existing = this.byId.get(row.id);
    if (existing !== undefined) return existing;
    const entry = this.remember({ record: recordOf(row), version: Number(row.version), reloading: false, reloadAgain: false });
    // A change notified while the row was on its way is newer than what was read.
    if ((this.notified.get(row.id) ?? -1) > entry.version) this.reload(entry);
    return entry;
  }

  private async loadByToken(hash: string): Promise<Cached | null> {
    const inFlight = this.loading.get(hash);
    if (inFlight !== undefined) return inFlight;
    const load = (async () => {
      const { rows } = await this.query<SessionRow>(`${SELECT_SESSION} WHERE s.token_hash = $1`, [hash]);
      const row = rows[0];
      return row === undefined ? null : this.adopt(row);
    })();
    this.loading.set(hash, load);
    try {
      return await load;
    } finally {
      this.loading.delete(hash);
    }
  }

  /** Applies a change of `version` to a cached session: in order, or by reloading it. */
  private advance(entry: Cached, version: number, change: PgChange): void {
    if (version <= entry.version) return; // already applied (our own write, or notified first)
    if (version === entry.version + 1 && change.kind !== 'reload' && !entry.reloading) {
      applyChange(entry.record, change);
      entry.version = version;
      this.emit(entry.record.id);
      return;
    }
    this.reload(entry);
  }

  /** Refreshes a cached session from PostgreSQL in place (a missed change, or one too big to notify). */
  private reload(entry: Cached): void {
    if (entry.reloading) {
      entry.reloadAgain = true;
      return;
    }
    entry.reloading = true;
    void (async () => {
      try {
        do {
          entry.reloadAgain = false;
          const { rows } = await this.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = $1`, [entry.record.id]);
          const row = rows[0];
          if (row === undefined) break;
          refresh(entry, row);
        } while (entry.reloadAgain || (this.notified.get(entry.record.id) ?? -1) > entry.version);
        this.emit(entry.record.id);
      } catch (err) {
        // Not current any more, and no way to tell: forget it, the next request loads it again.
        this.opts.log(`session state: could not reload session ${entry.record.id}: ${message(err)}`);
        this.byId.delete(entry.record.id);
        entry.version = Number.MAX_SAFE_INTEGER; // never applied to again; its holders re-authenticate
      } finally {
        entry.reloading = false;
      }
    })();
  }

  private emit(sessionId: string): void {
    for (const listener of this.listeners) listener(sessionId);
  }

  // --- notifications and heartbeat -----------------------------------------

  private payload(change: PgChange): string {
    const json = JSON.stringify(change);
    return Buffer.byteLength(json) + 40 > MAX_PAYLOAD ? JSON.stringify({ kind: 'reload' } satisfies PgChange) : json;
  }

  private onNotification(payload: string | undefined): void {
    if (payload === undefined) return;
    const first = payload.indexOf(' ');
    const second = payload.indexOf(' ', first + 1);
    const id = payload.slice(0, first);
    const version = Number(payload.slice(first + 1, second));
    let change: PgChange;
    try {
      change = JSON.parse(payload.slice(second + 1)) as PgChange;
    } catch {
      change = { kind: 'reload' };
    }
    if (first < 0 || second < 0 || !Number.isSafeInteger(version)) return;
    if (version > (this.notified.get(id) ?? -1)) this.notified.set(id, version);
    const entry = this.byId.peek(id);
    if (entry !== undefined) this.advance(entry, version, change);
  }

  /** Opens the listening connection; after a loss, reloads every cached session before trusting the cache again. */
  private listen(): Promise<void> {
    if (this.connecting !== null) return this.connecting;
    this.connecting = (async () => {
      const client = new pg.Client({ connectionString: this.opts.url, connectionTimeoutMillis: this.timeoutMs, application_name: 'knowledgefs-listen' });
      client.on('notification', (msg) => this.onNotification(msg.payload));
      client.on('error', (err) => this.lost(client, message(err)));
      client.on('end', () => this.lost(client, 'connection closed'));
      try {
        await client.connect();
        const startedAt = this.now();
        await client.query(`LISTEN ${CHANNEL}`);
        if (this.closed) {
          await client.end();
          return;
        }
        this.listener = client;
        // Changes made while nobody listened were never notified here.
        await this.reloadAll();
        if (this.listener === client) this.confirmedAt = startedAt;
      } catch (err) {
        await client.end().catch(() => undefined);
        throw new KnowledgeError('unavailable', `session state: cannot listen on PostgreSQL at ${this.where}: ${message(err)}`, { cause: err });
      }
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** Every cached session read again, RELOAD_BATCH per query (after a gap in listening). Throws when PostgreSQL fails. */
  private async reloadAll(): Promise<void> {
    const entries = [...this.byId.values()];
    for (let i = 0; i < entries.length; i += RELOAD_BATCH) {
      const batch = entries.slice(i, i + RELOAD_BATCH);
      // One being reloaded on its own already ends current (or dropped).
      const mine = batch.filter((e) => !e.reloading);
      for (const e of mine) e.reloading = true;
      try {
        const { rows } = await this.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = ANY ($1::text[])`, [mine.map((e) => e.record.id)]);
        const byId = new Map(rows.map((r) => [r.id, r]));
        for (const e of mine) {
          const row = byId.get(e.record.id);
          if (row !== undefined) refresh(e, row);
        }
      } finally {
        for (const e of mine) e.reloading = false;
      }
      for (const e of mine) {
        if (e.reloadAgain || (this.notified.get(e.record.id) ?? -1) > e.version) this.reload(e);
        else this.emit(e.record.id);
      }
    }
    while (entries.some((e) => e.reloading)) await new Promise((r) => setTimeout(r, 5));
  }

  private lost(client: pg.Client, reason: string): void {
    if (this.listener !== client) return;
    this.listener = null;
    this.confirmedAt = -Infinity;
    this.lostReason = reason;
    if (!this.closed) this.opts.log(`session state: lost the PostgreSQL notification connection (${reason}); refusing requests that need a session until it is back`);
    client.end().catch(() => undefined);
  }

  private async heartbeat(): Promise<void> {
    if (this.closed || this.confirming !== null) return;
    await this.confirm();
    if (this.now() - this.statsAt >= STATS_EVERY_MS) await this.refreshStats().catch(() => undefined);
  }

  private confirm(): Promise<void> {
    this.confirming ??= this.beat().finally(() => {
      this.confirming = null;
    });
    return this.confirming;
  }

  private async beat(): Promise<void> {
    const client = this.listener;
    if (client === null) {
      try {
        await this.listen();
        if (this.listener !== null) this.opts.log('session state: listening to PostgreSQL again');
      } catch (err) {
        this.lostReason = message(err);
      }
      return;
    }
    const startedAt = this.now();
    // Trust already lapses with the bound; this only decides when the connection counts as dead (a busy
    // event loop runs this timer before reading the answer, so it must not be as tight as the bound).
    const limitMs = Math.max(2 * this.opts.heartbeatMs, this.timeoutMs);
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no heartbeat answer within ${limitMs} ms`)), limitMs).unref());
    try {
      await Promise.race([client.query('SELECT 1'), timeout]);
      if (this.listener === client) this.confirmedAt = Math.max(this.confirmedAt, startedAt);
    } catch (err) {
      this.lost(client, message(err));
    }
  }

  /** One round trip; `background` ones (the session-count refresh) are not counted as a request's. */
  private async query<R extends pg.QueryResultRow>(text: string, values?: unknown[], background = false): Promise<pg.QueryResult<R>> {
    if (!background) this.opts.onRoundTrip?.();
    try {
      return await this.pool.query<R>(text, values);
    } catch (err) {
      if (err instanceof KnowledgeError) throw err;
      throw new KnowledgeError('unavailable', `session state unavailable (PostgreSQL at ${this.where}: ${message(err)}); retry shortly`, { cause: err });
    }
  }
}
