// The dedicated connection that LISTENs for session changes, and the trust
// bound built on its heartbeat.
//
// The listening connection runs a heartbeat query every `heartbeatMs`. A
// heartbeat that started at time T and completed proves that every
// notification committed before T has been received (PostgreSQL sends
// pending notifications before answering a query). The cache is used only
// while such a T lies within `2 × heartbeatMs` of now. Past that, a request
// that needs a session first runs a heartbeat itself (one, shared by every
// request waiting: a replica too busy to run the timer's on time is not
// down); if that fails, or the listening connection is gone, it is refused
// with `unavailable` (503 with Retry-After) until the connection is back and
// every cached session has been reloaded.

import pg from 'pg';
import { KnowledgeError } from '../../../core/errors.js';
import { CHANNEL } from './pg-session-changes.js';
import { pgErrorText } from './pg-error-text.js';

export interface PgNotificationListenerOptions {
  readonly url: string;
  /** The URL as logs may show it. */
  readonly where: string;
  readonly heartbeatMs: number;
  readonly timeoutMs: number;
  readonly now: () => number;
  readonly log: (line: string) => void;
  readonly onNotification: (payload: string | undefined) => void;
  /** Run once listening, before the cache is trusted: changes made while nobody listened were never notified. */
  readonly onListening: () => Promise<void>;
}

export class PgNotificationListener {
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  /** Start time of the last heartbeat completed on a listening connection. */
  private confirmedAt = -Infinity;
  /** Why the connection was lost, or last failed to come back: what the log said last. */
  private lostReason = 'not connected yet';
  /** The heartbeat in flight (timer or on demand); callers share it. */
  private confirming: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly opts: PgNotificationListenerOptions) {}

  /** True while a heartbeat is in flight. */
  get beating(): boolean {
    return this.confirming !== null;
  }

  private fresh(): boolean {
    return this.opts.now() - this.confirmedAt <= 2 * this.opts.heartbeatMs;
  }

  /**
   * The cache may answer only while a heartbeat confirmed it within the
   * bound. A replica too busy to run its heartbeat on time (a burst of
   * requests holding the event loop) confirms on demand: one heartbeat on
   * the listening connection, shared by every request waiting for it, which
   * also delivers any notification still unread. Without a listening
   * connection, or when that heartbeat fails, the request is refused.
   */
  async ensureTrusted(): Promise<void> {
    // Twice: a heartbeat already in flight may have started before the bound.
    for (let i = 0; i < 2 && !this.fresh() && this.client !== null; i++) await this.confirm();
    if (this.fresh()) return;
    // What went wrong, and where PostgreSQL is, are in the log (`lost`): a client is told neither.
    throw new KnowledgeError('unavailable', 'session state unavailable: lost contact with PostgreSQL; retry shortly');
  }

  /** Opens the listening connection; after a loss, reloads every cached session before trusting the cache again. */
  listen(): Promise<void> {
    if (this.connecting !== null) return this.connecting;
    this.connecting = (async () => {
      const client = new pg.Client({ connectionString: this.opts.url, connectionTimeoutMillis: this.opts.timeoutMs, application_name: 'knowledgefs-listen' });
      client.on('notification', (msg) => this.opts.onNotification(msg.payload));
      client.on('error', (err) => this.lost(client, pgErrorText(err)));
      client.on('end', () => this.lost(client, 'connection closed'));
      try {
        await client.connect();
        const startedAt = this.opts.now();
        await client.query(`LISTEN ${CHANNEL}`);
        if (this.closed) {
          await client.end();
          return;
        }
        this.client = client;
        // Changes made while nobody listened were never notified here.
        await this.opts.onListening();
        if (this.client === client) this.confirmedAt = startedAt;
      } catch (err) {
        await client.end().catch(() => undefined);
        throw new KnowledgeError('unavailable', `session state: cannot listen on PostgreSQL at ${this.opts.where}: ${pgErrorText(err)}`, { cause: err });
      }
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** One heartbeat (or reconnection when the connection is gone), shared by every caller meanwhile. */
  confirm(): Promise<void> {
    this.confirming ??= this.beat().finally(() => {
      this.confirming = null;
    });
    return this.confirming;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private lost(client: pg.Client, reason: string): void {
    if (this.client !== client) return;
    this.client = null;
    this.confirmedAt = -Infinity;
    this.lostReason = reason;
    if (!this.closed) this.opts.log(`session state: lost the PostgreSQL notification connection (${reason}); refusing requests that need a session until it is back`);
    client.end().catch(() => undefined);
  }

  private async beat(): Promise<void> {
    const client = this.client;
    if (client === null) {
      try {
        await this.listen();
        if (this.client !== null) this.opts.log('session state: listening to PostgreSQL again');
      } catch (err) {
        // Logged once per reason, not once per heartbeat of an outage.
        const reason = pgErrorText(err);
        if (reason !== this.lostReason) this.opts.log(`session state: still not listening to PostgreSQL: ${reason}`);
        this.lostReason = reason;
      }
      return;
    }
    const startedAt = this.opts.now();
    // Trust already lapses with the bound; this only decides when the connection counts as dead (a busy
    // event loop runs this timer before reading the answer, so it must not be as tight as the bound).
    const limitMs = Math.max(2 * this.opts.heartbeatMs, this.opts.timeoutMs);
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no heartbeat answer within ${limitMs} ms`)), limitMs).unref());
    try {
      await Promise.race([client.query('SELECT 1'), timeout]);
      if (this.client === client) this.confirmedAt = Math.max(this.confirmedAt, startedAt);
    } catch (err) {
      this.lost(client, pgErrorText(err));
    }
  }
}
