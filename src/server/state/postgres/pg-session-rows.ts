// Sessions as PostgreSQL stores them (sql/migrations): the row a query reads
// back, and the record a replica caches from it.

import type { SessionKind } from '../../../core/session/policy.js';
import { CHANNEL } from './pg-session-changes.js';
import type { SessionRecord } from '../session-state.js';

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

/**
 * A new session, and its `created` notification ($7) in the same statement:
 * replicas that remembered its token hash as unknown forget that at once.
 * $1..$6: id, token_hash, kind, creator, team, created_at.
 */
export const INSERT_SESSION = `
  WITH s AS (
    INSERT INTO knowledgefs_sessions (id, token_hash, kind, creator, team, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
  )
  SELECT pg_notify('${CHANNEL}', s.id || ' 0 ' || $7) AS notified FROM s`;
