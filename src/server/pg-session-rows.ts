// Sessions as PostgreSQL stores them (sql/migrations): the row a query reads
// back, and the record a replica caches from it.

import type { SessionKind } from '../core/policy.js';
import type { SessionRecord } from './session-registry.js';

export interface SessionRow {
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

/** A session with its read set in order; callers add the WHERE. */
export const SELECT_SESSION = `
  SELECT s.*, coalesce((SELECT json_agg(json_build_array(r.path, r.sha256) ORDER BY r.read_order)
                        FROM knowledgefs_read_set r WHERE r.session_id = s.id), '[]') AS read_set
  FROM knowledgefs_sessions s`;

export function recordOf(row: SessionRow): SessionRecord {
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
