// The audit trail: one JSON line per CanLoadScope decision, with the trace
// that explains it. The token never appears here (sessions are named by id).
// Lines are appended through one stream in order; `flush()` resolves once
// everything written so far reached the file.

import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Decision, MembershipAnswer } from '../core/policy.js';

/**
 * plan|open|read|mount from DESIGN.md; manifest|reminder check what those
 * routes advertise; explain is an operator asking why (GET /v1/admin/explain).
 */
export type AuditAction = 'plan' | 'open' | 'read' | 'mount' | 'manifest' | 'reminder' | 'explain';

export interface AuditRecord {
  readonly time: string;
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
  append(record: AuditRecord): void;
  flush(): Promise<void>;
  close(): Promise<void>;
}

export function toAuditRecord(
  time: string,
  session: { id: string; kind: string; creator: string; team?: string | undefined },
  action: AuditAction,
  decision: Decision,
  requestId?: string,
): AuditRecord {
  return {
    time,
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
  const stream: WriteStream = createWriteStream(file, { flags: 'a', mode: 0o600 });
  let failed = false;
  stream.on('error', (err) => {
    if (!failed) log(`audit log ${file}: ${err.message}`);
    failed = true;
  });
  return {
    append(record) {
      stream.write(`${JSON.stringify(record)}\n`);
    },
    flush() {
      return new Promise((resolve) => {
        if (stream.writableLength === 0) resolve();
        else stream.write('', () => resolve());
      });
    },
    close() {
      return new Promise((resolve) => stream.end(() => resolve()));
    },
  };
}

export function memoryAuditSink(): AuditSink & { readonly records: AuditRecord[] } {
  const records: AuditRecord[] = [];
  return {
    records,
    append: (r) => void records.push(r),
    flush: async () => undefined,
    close: async () => undefined,
  };
}
