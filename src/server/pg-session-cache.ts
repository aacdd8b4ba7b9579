// The sessions one replica has served, cached (bounded LRU) and kept current
// from notifications: a notified change is applied when its version is the
// next one of the cached session, skipped when already applied, and a gap (or
// a change too big for a notification) reloads the session. Records are
// updated in place, so long-polls holding one see mounts and revocations.

import type pg from 'pg';
import { LRUCache } from 'lru-cache';
import type { SessionRecord } from './session-registry.js';
import { pgErrorText } from './pg-error-text.js';
import { applyChange, type Notified, type PgChange } from './pg-session-changes.js';
import { recordOf, SELECT_SESSION, type SessionRow } from './pg-session-rows.js';

/** Sessions read back per query after the notification connection was lost (read sets included). */
const RELOAD_BATCH = 100;

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

  /** The session holding the token of this hash, from PostgreSQL (one query, shared by concurrent callers). */
  async loadByToken(hash: string): Promise<Cached | null> {
    const inFlight = this.loading.get(hash);
    if (inFlight !== undefined) return inFlight;
    const load = (async () => {
      const { rows } = await this.opts.query<SessionRow>(`${SELECT_SESSION} WHERE s.token_hash = $1`, [hash]);
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

  /** A notification received: remembered, and applied to the session if it is cached. */
  notify({ id, version, change }: Notified): void {
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
