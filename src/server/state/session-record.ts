// What every session state does with a session record, whichever backend
// holds it: tokens (`kfs_` + 32 random bytes, base64url; only their sha256 is
// kept, compared in constant time), a fresh record, and a read applied to the
// read set (an older entry of the path replaced, the oldest forgotten past
// MAX_READ_SET). The file-backed registry and PostgreSQL both use these, so a
// session behaves the same behind either.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NewSession, ReadSetEntry, SessionRecord } from './session-state.js';

export const TOKEN_PREFIX = 'kfs_';
/** Most read-set entries kept per session; the oldest reads are forgotten first. */
export const MAX_READ_SET = 10_000;

export function hashToken(token: string): string {
  // Stryker disable next-line StringLiteral: an empty encoding name is UTF-8 too; 'utf8' says so for the reader
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function newToken(): string {
  return `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** A fresh session (random id and token) and its token, which only the caller ever sees. */
export function newSession(input: NewSession, createdAt: string): { record: SessionRecord; token: string } {
  const token = newToken();
  const record: SessionRecord = {
    id: `ses_${randomBytes(12).toString('hex')}`,
    kind: input.kind,
    creator: input.creator,
    ...(input.team !== undefined ? { team: input.team } : {}),
    tokenHash: hashToken(token),
    revoked: false,
    mounted: [],
    readSet: [],
    createdAt,
  };
  return { record, token };
}

/** The read set after a read of `entry`: an older entry of its path is replaced, the oldest forgotten past the cap. */
function withRead(readSet: readonly ReadSetEntry[], entry: ReadSetEntry): ReadSetEntry[] {
  const next = [...readSet.filter((e) => e.path !== entry.path), entry];
  // Stryker disable next-line EqualityOperator: at exactly MAX_READ_SET the slice keeps everything, as no slice does
  return next.length > MAX_READ_SET ? next.slice(next.length - MAX_READ_SET) : next;
}

/** Applies an acknowledged read (and its mount, if any) to a record: what every session state does with one. */
export function applyRead(record: SessionRecord, entry: ReadSetEntry, mount: string | undefined): void {
  if (mount !== undefined && !record.mounted.includes(mount)) record.mounted = [...record.mounted, mount];
  record.readSet = withRead(record.readSet, entry);
}

/** True when `presentedHash` (hashToken of a presented token) is the record's, compared in constant time. */
export function holdsToken(record: SessionRecord, presentedHash: string): boolean {
  const stored = Buffer.from(record.tokenHash, 'hex');
  const presented = Buffer.from(presentedHash, 'hex');
  return stored.length === presented.length && timingSafeEqual(stored, presented);
}
