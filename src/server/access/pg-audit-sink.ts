// `--audit-log postgres`: every replica's decisions in one table of the state
// database (knowledgefs_audit, partitioned by day), written in batches.
//
// The request path never waits on PostgreSQL: `append` pushes the record
// into an AuditBuffer and returns. A writer takes up to `batchRecords` of
// them every `flushMs` (sooner when a batch is full) and sends ONE multi-row
// INSERT, bounded by `timeoutMs`; only one is in flight. If it fails the
// batch goes back in front and the writer waits `retryMs`. The buffer holds
// at most `bufferRecords` decisions; beyond that the oldest are dropped and
// counted (knowledgefs_audit_dropped_total), with one log line when writes
// start failing and one when they work again.

import pg from 'pg';
import { pgErrorText } from '../state/postgres/pg-error-text.js';
import { AuditBuffer, Outage } from './audit-buffer.js';
import type { AuditRecord, AuditSink } from './audit-log.js';
import { keepPartitions } from './pg-audit-partitions.js';
import { queryAudit } from './pg-audit-query.js';

const COLUMNS = ['time', 'replica', 'session', 'kind', 'creator', 'team', 'scope', 'action', 'rule', 'membership', 'result', 'request_id'] as const;
const HOUR_MS = 3600 * 1000;

export interface PgAuditOptions {
  readonly url: string;
  readonly log: (line: string) => void;
  readonly retentionMs: number;
  /** Decisions held while PostgreSQL is slow or down. Default 10 000. */
  readonly bufferRecords?: number;
  /** Rows of one INSERT. Default 500. */
  readonly batchRecords?: number;
  /** Longest a decision waits for its batch to fill. Default 200 ms. */
  readonly flushMs?: number;
  /** Longest one INSERT (or a connection attempt) may take. Default 2 000 ms. */
  readonly timeoutMs?: number;
  /** Pause after a failed write. Default 1 000 ms. */
  readonly retryMs?: number;
  readonly onDrop: (count: number) => void;
  readonly now?: () => number;
}

function rowOf(r: AuditRecord): unknown[] {
  return [r.time, r.replica, r.session, r.kind, r.creator, r.team, r.scope, r.action, r.rule, r.membership === null ? null : JSON.stringify(r.membership), r.result, r.requestId];
}

export class PgAuditSink implements AuditSink {
  private readonly pool: pg.Pool;
  private readonly buffer: AuditBuffer<AuditRecord>;
  private readonly outage: Outage;
  private readonly batchRecords: number;
  private readonly flushMs: number;
  private readonly retryMs: number;
  private readonly now: () => number;
  private writing: Promise<boolean> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private maintenance: NodeJS.Timeout | null = null;
  private closed = false;

  private constructor(private readonly opts: PgAuditOptions) {
    const timeoutMs = opts.timeoutMs ?? 2_000;
    this.batchRecords = opts.batchRecords ?? 500;
    this.flushMs = opts.flushMs ?? 200;
    this.retryMs = opts.retryMs ?? 1_000;
    this.now = opts.now ?? Date.now;
    const max = opts.bufferRecords ?? 10_000;
    // statement_timeout makes PostgreSQL itself cancel an INSERT stuck behind a lock, so a batch put back is
    // never also written later; query_timeout (a little longer) covers a server that stopped answering.
    this.pool = new pg.Pool({
      connectionString: opts.url,
      max: 2,
      connectionTimeoutMillis: timeoutMs,
      statement_timeout: timeoutMs,
      query_timeout: timeoutMs + 500,
      idleTimeoutMillis: 30_000,
      application_name: 'knowledgefs-audit',
    });
    this.pool.on('error', () => undefined);
    this.outage = new Outage('writes to PostgreSQL', opts.log, `up to ${max} decisions are held`);
    this.buffer = new AuditBuffer(max, (n) => {
      this.outage.dropped(n);
      opts.onDrop(n);
    });
  }

  /** Creates today's partitions (the schema is migrated by the session state, which opens first) and starts the writer. */
  static async open(opts: PgAuditOptions): Promise<PgAuditSink> {
    const sink = new PgAuditSink(opts);
    try {
      await sink.keepPartitions();
    } catch (err) {
      await sink.pool.end().catch(() => undefined);
      throw err;
    }
    sink.maintenance = setInterval(() => void sink.keepPartitions().catch((err: unknown) => opts.log(`audit log: keeping partitions failed: ${pgErrorText(err)}`)), HOUR_MS);
    sink.maintenance.unref();
    sink.schedule(sink.flushMs);
    return sink;
  }

  async keepPartitions(): Promise<void> {
    const client = await this.pool.connect();
    try {
      const { created, dropped } = await keepPartitions(client, this.now(), this.opts.retentionMs);
      if (created.length > 0 || dropped.length > 0) {
        this.opts.log(`audit log: partitions${created.length > 0 ? ` created ${created.join(', ')}` : ''}${dropped.length > 0 ? ` dropped ${dropped.join(', ')}` : ''}`);
      }
    } finally {
      client.release();
    }
  }

  append(record: AuditRecord): void {
    this.buffer.push(record);
    if (this.buffer.size >= this.batchRecords && this.writing === null && !this.outage.down) this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.writeOnce().then((ok) => this.schedule(ok ? (this.buffer.size >= this.batchRecords ? 0 : this.flushMs) : this.retryMs));
    }, ms);
    this.timer.unref();
  }

  /** Writes one batch (if any, and none is in flight); false when it failed. */
  private writeOnce(): Promise<boolean> {
    if (this.writing !== null) return this.writing;
    if (this.buffer.size === 0) return Promise.resolve(true);
    const batch = this.buffer.take(this.batchRecords);
    const values = batch.flatMap(rowOf);
    const tuples = batch.map((_, i) => `(${COLUMNS.map((__, c) => `$${i * COLUMNS.length + c + 1}`).join(', ')})`);
    this.writing = this.pool
      .query(`INSERT INTO knowledgefs_audit (${COLUMNS.join(', ')}) VALUES ${tuples.join(', ')}`, values)
      .then(
        () => {
          this.outage.worked();
          return true;
        },
        (err: unknown) => {
          this.buffer.putBack(batch);
          this.outage.failed(pgErrorText(err));
          return false;
        },
      )
      .finally(() => {
        this.writing = null;
      });
    return this.writing;
  }

  /** Resolves once everything appended so far is written, or a write failed. */
  async flush(): Promise<void> {
    if (this.writing !== null) await this.writing;
    while (this.buffer.size > 0) if (!(await this.writeOnce())) return;
  }

  reopen(): Promise<void> {
    return Promise.resolve();
  }

  recent(session: string, limit: number): Promise<AuditRecord[]> {
    return queryAudit(this.pool, { session, limit });
  }

  /** Writes what is held (each INSERT bounded by the timeout; a failure ends it), then disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.maintenance !== null) clearInterval(this.maintenance);
    await this.flush();
    if (this.buffer.size > 0) this.opts.log(`audit log: ${this.buffer.size} decisions not written to PostgreSQL at shutdown`);
    await this.pool.end().catch(() => undefined);
  }
}
