// The PostgreSQL session cache alone, with its queries answered by hand: the
// order in which a slow reload and a revocation arrive is then exact, which
// a real PostgreSQL cannot be made to produce on demand (test/postgres has
// the end-to-end cases).

import { describe, expect, it } from 'vitest';
import { PgSessionCache, type Query } from '../src/server/state/postgres/pg-session-cache.js';
import type { SessionRow } from '../src/server/state/postgres/pg-session-rows.js';

function row(version: number, revoked: boolean): SessionRow {
  return { id: 'ses_1', token_hash: 'a'.repeat(64), kind: 'personal', creator: 'alice', team: null, revoked, mounted: [], created_at: '2026-01-01T00:00:00Z', version: String(version), read_set: [] };
}

/** A query function whose answers the test gives, one pending query at a time. */
function handQueries() {
  const pending: ((rows: SessionRow[]) => void)[] = [];
  const query = ((_text: string, _values?: unknown[]) =>
    new Promise((resolve) => pending.push((rows) => resolve({ rows, rowCount: rows.length, command: 'SELECT', oid: 0, fields: [] } as never)))) as Query;
  const answer = async (rows: SessionRow[]) => {
    for (let i = 0; i < 50 && pending.length === 0; i++) await new Promise((r) => setImmediate(r));
    const next = pending.shift();
    if (next === undefined) throw new Error('no query pending');
    next(rows);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  };
  return { query, answer, pending };
}

describe('PgSessionCache', () => {
  it('a reload that read the session before its revocation, answering after it, leaves it revoked', async () => {
    const { query, answer, pending } = handQueries();
    const cache = new PgSessionCache({ max: 10, query, log: () => undefined });
    const entry = cache.adopt(row(1, false));
    cache.notify({ id: 'ses_1', version: 3, change: { kind: 'reload' } }); // a gap: reloads
    expect(pending).toHaveLength(1);
    cache.notify({ id: 'ses_1', version: 4, change: { kind: 'revoke' } });
    expect(entry.record.revoked).toBe(true);
    await answer([row(3, false)]); // read before the revocation
    expect(entry.record.revoked).toBe(true);
    await answer([row(4, true)]);
    expect(entry.record).toMatchObject({ revoked: true });
    expect(entry.version).toBe(4);
  });
});
