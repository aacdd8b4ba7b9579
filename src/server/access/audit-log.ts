// The audit trail: one JSON line per CanLoadScope decision, with the trace
// that explains it. The token never appears here (sessions are named by id).
// Lines are appended through one stream in order; `flush()` resolves once
// everything written so far reached the file.
//
// Rotation follows the logrotate convention: rename the file, then send the
// control plane SIGHUP; `reopen()` opens the path anew (creating it, 0600) and
// closes the old stream once what was written to it has reached the renamed
// file. No line is lost or split between the two.

import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import type { Decision, MembershipAnswer } from '../../core/session/policy.js';
import type { ResourceKind } from '../../core/wire.js';
import { AuditBuffer, Outage } from './audit-buffer.js';

/**
 * plan|open|read|mount from DESIGN.md; manifest|reminder check what those
 * routes advertise; explain is an operator asking why (GET /v1/admin/explain);
 * knowledge|skill|tool|agent is a harness asking before it offers a
 * resource of that kind (POST /v1/can-load).
 */
export type AuditAction = 'plan' | 'open' | 'read' | 'mount' | 'manifest' | 'reminder' | 'explain' | ResourceKind;

export interface AuditRecord {
  readonly time: string;
  /** The replica that made the decision (`--replica-id`). */
  readonly replica: string;
  readonly session: string;
  readonly kind: string;
  readonly creator: string;
  readonly team: string | null;
  readonly scope: string;
  readonly action: AuditAction;
  readonly rule: string;
  /** The membership answer the decision rested on (or the error); null when none was needed. */
  readonly membership: MembershipAnswer | null;
  readonly result: 'allow' | 'deny';
  /** The request the decision was made for (its `x-request-id`), null outside a request. */
  readonly requestId: string | null;
}

export interface AuditSink {
  /** Never waits and never throws: the request path hands the record over and goes on. */
  append(record: AuditRecord): void;
  flush(): Promise<void>;
  /** Opens the file again by its path (after a rotation renamed it); a sink without a file does nothing. */
  reopen(): Promise<void>;
  close(): Promise<void>;
  /** The session's last `limit` decisions from every replica, newest first; only a sink that can read them back has it. */
  recent?(session: string, limit: number): Promise<AuditRecord[]>;
}

export function toAuditRecord(
  time: string,
  replica: string,
  session: { id: string; kind: string; creator: string; team?: string | undefined },
  action: AuditAction,
  decision: Decision,
  requestId?: string,
): AuditRecord {
  return {
    time,
    replica,
    session: session.id,
    kind: session.kind,
    creator: session.creator,
    team: session.team ?? null,
    scope: decision.scope,
    action,
    rule: decision.rule,
    membership: decision.membership ?? null,
    result: decision.allowed ? 'allow' : 'deny',
    requestId: requestId ?? null,
  };
}

export function fileAuditSink(file: string, log: (line: string) => void): AuditSink {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  let failed = false;
  const open = (): WriteStream => {
    const s = createWriteStream(file, { flags: 'a', mode: 0o600 });
    s.on('error', (err) => {
      // Stryker disable next-line ConditionalExpression,BooleanLiteral: a write stream emits 'error' once (it is destroyed by it) and reopen() makes a new one; the flag is a guard for streams that would not
      if (!failed) log(`audit log ${file}: ${err.message}`);
      // Stryker disable next-line BooleanLiteral: as above
      failed = true;
    });
    return s;
  };
  let stream = open();
  return {
    reopen() {
      const old = stream;
      failed = false;
      stream = open();
      return new Promise((resolve) => old.end(() => resolve()));
    },
    append(record) {
      stream.write(`${JSON.stringify(record)}\n`);
    },
    flush() {
      return new Promise((resolve) => {
        // Stryker disable next-line ConditionalExpression: an empty write's callback also comes once everything before it is written; this only saves a tick
        if (stream.writableLength === 0) resolve();
        else stream.write('', () => resolve());
      });
    },
    close() {
      return new Promise((resolve) => stream.end(() => resolve()));
    },
  };
}

/**
 * `--audit-log -`: JSON lines on stdout, for a log collector. A reader that
 * stops reading (a full pipe) never blocks a request: lines wait in the
 * stream up to its high-water mark, then in an AuditBuffer of `max`
 * decisions, and beyond that the oldest are dropped and counted.
 */
export function streamAuditSink(out: Writable, max: number, log: (line: string) => void, onDrop: (count: number) => void): AuditSink {
  const outage = new Outage('stdout', log, `up to ${max} decisions wait while the reader is not reading`);
  // A burst above the stream's high-water mark is normal; only a full buffer (a reader that stopped) is an outage.
  const held = new AuditBuffer<AuditRecord>(max, (n) => {
    outage.failed('the reader of stdout is not keeping up');
    outage.dropped(n);
    onDrop(n);
  });
  let blocked = false;
  const pump = (): void => {
    while (held.size > 0 && !blocked) {
      const [record] = held.take(1);
      if (!out.write(`${JSON.stringify(record)}\n`)) blocked = true;
    }
    if (held.size === 0) outage.worked();
  };
  out.on('drain', () => {
    blocked = false;
    pump();
  });
  out.on('error', (err) => outage.failed(err.message));
  // Stryker disable next-line ConditionalExpression: while decisions are held the stream is blocked, so its writableLength is not 0 either; held.size === 0 says why it waits
  const flushed = (): Promise<void> => new Promise((resolve) => (held.size === 0 && out.writableLength === 0 ? resolve() : setTimeout(() => void flushed().then(resolve), 5)));
  return {
    append(record) {
      held.push(record);
      // Stryker disable next-line ConditionalExpression: pump() does nothing while blocked (its loop stops, and something is held)
      if (!blocked) pump();
    },
    flush: flushed,
    reopen: async () => undefined,
    // stdout stays open for the process's last lines; closing waits at most a second for the reader.
    close: () => Promise.race([flushed(), new Promise<void>((resolve) => setTimeout(resolve, 1_000).unref())]),
  };
}

export function memoryAuditSink(): AuditSink & { readonly records: AuditRecord[] } {
  const records: AuditRecord[] = [];
  return {
    records,
    append: (r) => void records.push(r),
    flush: async () => undefined,
    reopen: async () => undefined,
    close: async () => undefined,
  };
}
