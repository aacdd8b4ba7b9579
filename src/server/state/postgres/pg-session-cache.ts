// The sessions one replica has served, cached (bounded LRU) and kept current
// from notifications: a notified change is applied when its version is the
// next one of the cached session, skipped when already applied, and a gap (or
// a change too big for a notification) reloads the session. Records are
// updated in place, so long-polls holding one see mounts and revocations.

import type pg from 'pg';
import { LRUCache } from 'lru-cache';
import { KnowledgeError } from '../../../core/errors.js';
import type { SessionRecord } from '../session-state.js';
import { pgErrorText } from './pg-error-text.js';
import { applyChange, type Notified, type PgChange } from './pg-session-changes.js';
import { recordOf, SELECT_SESSION, type SessionRow } from './pg-session-rows.js';

/** Sessions read back per query after the notification connection was lost (read sets included). */
const RELOAD_BATCH = 100;
/** Token hashes looked up per query: requests with tokens not cached wait for one query in flight at a time. */
export const LOOKUP_BATCH = 500;
/** Unknown token hashes remembered, and for how long (a session created since is announced: see `notify`). */
const MAX_MISSES = 50_000;
const MISS_TTL_MS = 60_000;
/** Lookups that may wait for a query; past that a request is refused (503) rather than queued without bound. */
const MAX_QUEUED = 10_000;

interface Waiter {
  resolve(entry: Cached | null): void;
  reject(err: unknown): void;
}

export type Query = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<pg.QueryResult<R>>;

export interface Cached {
  readonly record: SessionRecord;
  /** The session version `record` reflects. */
  version: number;
  reloading: boolean;
  reloadAgain: boolean;
}

export interface PgSessionCacheOptions {
  /** Sessions cached. */
  readonly max: number;
  readonly query: Query;
  readonly log: (line: string) => void;
}

/** Brings a cached session in place to what a row just read says. */
function refresh(entry: Cached, row: SessionRow): void {
  const fresh = recordOf(row);
  // One way only: a row read before a revocation committed (a reload that was slow) must not undo it.
  entry.record.revoked ||= fresh.revoked;
  entry.record.mounted = fresh.mounted;
  entry.record.readSet = fresh.readSet;
  entry.version = Number(row.version);
}

export class PgSessionCache {
  private readonly byId: LRUCache<string, Cached>;
  private readonly idByToken = new Map<string, string>();
  /** Every record handed out, cached or evicted since: origin writes update it in place. */
  private readonly entryOf = new WeakMap<SessionRecord, Cached>();
  /** Highest version notified per session, cached or not: a load that raced a change reloads. */
  private readonly notified = new LRUCache<string, number>({ max: 100_000 });
  private readonly loading = new Map<string, Promise<Cached | null>>();
  /**
   * Token hashes PostgreSQL had no session for: made-up tokens cost no query
   * while remembered. Forgotten when a session for one is announced, and all
   * when listening again (an announcement may have been missed).
   */
  private readonly missed = new LRUCache<string, true>({ max: MAX_MISSES, ttl: MISS_TTL_MS });
  /** Bumped by every announced session: a lookup that ran meanwhile does not remember its misses. */
  private createdSeen = 0;
  /** Lookups waiting for the next query, by token hash. */
  private readonly queued = new Map<string, Waiter>();
  private lookingUp = false;
  private readonly listeners = new Set<(sessionId: string) => void>();

  constructor(private readonly opts: PgSessionCacheOptions) {
    this.byId = new LRUCache<string, Cached>({
      max: opts.max,
      dispose: (entry, id) => {
        if (this.idByToken.get(entry.record.tokenHash) === id) this.idByToken.delete(entry.record.tokenHash);
      },
    });
  }

  /** The cached record, without counting as a use. */
  peek(id: string): SessionRecord | undefined {
    return this.byId.peek(id)?.record;
  }

  /** The cached entry, without counting as a use. */
  peekEntry(id: string): Cached | undefined {
    return this.byId.peek(id);
  }

  get(id: string): Cached | undefined {
    return this.byId.get(id);
  }

  byToken(hash: string): Cached | undefined {
    const id = this.idByToken.get(hash);
    return id === undefined ? undefined : this.byId.get(id);
  }

  onChange(listener: (sessionId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  remember(entry: Cached): Cached {
    this.byId.set(entry.record.id, entry);
    this.idByToken.set(entry.record.tokenHash, entry.record.id);
    this.entryOf.set(entry.record, entry);
    return entry;
  }

  entryFor(record: SessionRecord): Cached {
    const entry = this.entryOf.get(record);
    if (entry !== undefined) return entry;
    return this.remember({ record, version: -1, reloading: false, reloadAgain: false });
  }

  /** Caches a session row just read (unless another path cached it meanwhile: that one record is kept). */
  adopt(row: SessionRow): Cached {
    const existing = this.byId.get(row.id);
    if (existing !== undefined) return existing;
    const entry = this.remember({ record: recordOf(row), version: Number(row.version), reloading: false, reloadAgain: false });
    // A change notified while the row was on its way is newer than what was read.
    if ((this.notified.get(row.id) ?? -1) > entry.version) this.reload(entry);
    return entry;
  }

  /**
   * The session holding the token of this hash, from PostgreSQL; null when
   * there is none (remembered for a while). Lookups share one query in flight
   * at a time, LOOKUP_BATCH hashes each: thousands of made-up tokens cost a
   * few queries and one pool connection, not one each.
   */
  async loadByToken(hash: string): Promise<Cached | null> {
    if (this.missed.has(hash)) return null;
    const inFlight = this.loading.get(hash);
    if (inFlight !== undefined) return inFlight;
    if (this.queued.size >= MAX_QUEUED) throw new KnowledgeError('unavailable', 'session state: too many sessions being looked up at once; retry shortly');
    const load = new Promise<Cached | null>((resolve, reject) => this.queued.set(hash, { resolve, reject }));
    this.loading.set(hash, load);
    this.lookUp();
    return load;
  }

  private lookUp(): void {
    if (this.lookingUp || this.queued.size === 0) return;
    this.lookingUp = true;
    const batch: [string, Waiter][] = [];
    for (const item of this.queued) {
      batch.push(item);
      if (batch.length === LOOKUP_BATCH) break;
    }
    for (const [hash] of batch) this.queued.delete(hash);
    const createdBefore = this.createdSeen;
    void (async () => {
      try {
        const { rows } = await this.opts.query<SessionRow>(`${SELECT_SESSION} WHERE s.token_hash = ANY ($1::text[])`, [batch.map(([hash]) => hash)]);
        const found = new Map(rows.map((r) => [r.token_hash, r]));
        for (const [hash, waiter] of batch) {
          const row = found.get(hash);
          if (row !== undefined) {
            waiter.resolve(this.adopt(row));
            continue;
          }
          // A session announced while the query ran may hold it: not remembered as unknown then.
          if (this.createdSeen === createdBefore) this.missed.set(hash, true);
          waiter.resolve(null);
        }
      } catch (err) {
        for (const [, waiter] of batch) waiter.reject(err);
      } finally {
        for (const [hash] of batch) this.loading.delete(hash);
        this.lookingUp = false;
        this.lookUp();
      }
    })();
  }

  /** A notification received: remembered, and applied to the session if it is cached. */
  notify({ id, version, change }: Notified): void {
    if (change.kind === 'created') {
      this.createdSeen++;
      this.missed.delete(change.tokenHash);
      return;
    }
    if (version > (this.notified.get(id) ?? -1)) this.notified.set(id, version);
    const entry = this.byId.peek(id);
    if (entry !== undefined) this.advance(entry, version, change);
  }

  /** Applies a change of `version` to a cached session: in order, or by reloading it. */
  advance(entry: Cached, version: number, change: PgChange): void {
    if (version <= entry.version) return; // already applied (our own write, or notified first)
    // A revocation holds at once, even out of order or while a reload is in flight (PostgreSQL may be
    // slow to answer it): it only ever goes one way, so nothing the reload brings back can contradict it.
    const revokedNow = change.kind === 'revoke' && !entry.record.revoked;
    if (revokedNow) entry.record.revoked = true;
    if (version === entry.version + 1 && change.kind !== 'reload' && !entry.reloading) {
      applyChange(entry.record, change);
      entry.version = version;
      this.emit(entry.record.id);
      return;
    }
    if (revokedNow) this.emit(entry.record.id);
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
          const { rows } = await this.opts.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = $1`, [entry.record.id]);
          const row = rows[0];
          if (row === undefined) break;
          refresh(entry, row);
        } while (entry.reloadAgain || (this.notified.get(entry.record.id) ?? -1) > entry.version);
        this.emit(entry.record.id);
      } catch (err) {
        // Not current any more, and no way to tell: forget it, the next request loads it again.
        this.opts.log(`session state: could not reload session ${entry.record.id}: ${pgErrorText(err)}`);
        this.byId.delete(entry.record.id);
        entry.version = Number.MAX_SAFE_INTEGER; // never applied to again; its holders re-authenticate
      } finally {
        entry.reloading = false;
      }
    })();
  }

  /** Every cached session read again, RELOAD_BATCH per query (after a gap in listening). Throws when PostgreSQL fails. */
  async reloadAll(): Promise<void> {
    // Sessions created while nobody listened were never announced here.
    this.createdSeen++;
    this.missed.clear();
    const entries = [...this.byId.values()];
    for (let i = 0; i < entries.length; i += RELOAD_BATCH) {
      const batch = entries.slice(i, i + RELOAD_BATCH);
      // One being reloaded on its own already ends current (or dropped).
      const mine = batch.filter((e) => !e.reloading);
      for (const e of mine) e.reloading = true;
      try {
        const { rows } = await this.opts.query<SessionRow>(`${SELECT_SESSION} WHERE s.id = ANY ($1::text[])`, [mine.map((e) => e.record.id)]);
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

  private emit(sessionId: string): void {
    for (const listener of this.listeners) listener(sessionId);
  }
}
