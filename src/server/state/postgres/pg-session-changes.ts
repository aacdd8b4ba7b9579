// Changes to a session as notified to every replica on CHANNEL: written by
// the statement that commits them, applied to cached sessions in version order.

import { applyRead } from '../session-record.js';
import type { ReadSetEntry, SessionRecord } from '../session-state.js';

export const CHANNEL = 'knowledgefs_sessions';
/** PostgreSQL refuses notification payloads of 8000 bytes or more; bigger changes are sent as "reload". */
const MAX_PAYLOAD = 7_900;

export type Update = [path: string, old: string, next: string | null];

/** A change as notified to the replicas; applied to a cached session in version order. */
export type PgChange =
  | { readonly kind: 'revoke' }
  | { readonly kind: 'read'; readonly entry: ReadSetEntry; readonly mount?: string }
  | { readonly kind: 'reminded'; readonly updates: Update[] }
  | { readonly kind: 'reload' }
  /** A new session (version 0): a replica that found no session for this token hash looks again. */
  | { readonly kind: 'created'; readonly tokenHash: string };

/** A notification as received: which session, its version after the change, and the change. */
export interface Notified {
  readonly id: string;
  readonly version: number;
  readonly change: PgChange;
}

export function applyChange(record: SessionRecord, change: PgChange): void {
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

/** The JSON a statement notifies for `change`: "reload" when it would not fit in a notification. */
export function changePayload(change: PgChange): string {
  const json = JSON.stringify(change);
  return Buffer.byteLength(json) + 40 > MAX_PAYLOAD ? JSON.stringify({ kind: 'reload' } satisfies PgChange) : json;
}

/** `ID VERSION JSON` as notified; undefined when it is not that. An unreadable change reloads. */
export function parseNotification(payload: string | undefined): Notified | undefined {
  if (payload === undefined) return undefined;
  const first = payload.indexOf(' ');
  const second = payload.indexOf(' ', first + 1);
  if (first < 0 || second < 0) return undefined;
  const version = Number(payload.slice(first + 1, second));
  if (!Number.isSafeInteger(version)) return undefined;
  let change: PgChange;
  try {
    change = JSON.parse(payload.slice(second + 1)) as PgChange;
  } catch {
    change = { kind: 'reload' };
  }
  return { id: payload.slice(0, first), version, change };
}
