// Reading the fleet's decision log back (`knowledgefs audit`, and the recent
// decisions `explain` shows): rows of knowledgefs_audit as AuditRecords.

import type pg from 'pg';
import type { AuditAction, AuditRecord } from './audit-log.js';
import type { MembershipAnswer } from '../../core/session/policy.js';

export interface AuditQuery {
  readonly session?: string | undefined;
  /** Only decisions at or after this time (ms since the epoch). */
  readonly sinceMs?: number | undefined;
  /** The newest `limit` decisions. */
  readonly limit: number;
}

interface AuditRow {
  time: Date;
  replica: string;
  session: string;
  kind: string;
  creator: string;
  team: string | null;
  scope: string;
  action: string;
  rule: string;
  membership: MembershipAnswer | null;
  result: 'allow' | 'deny';
  request_id: string | null;
}

/** The newest `limit` decisions that match, newest first. */
export async function queryAudit(client: pg.Pool | pg.ClientBase, q: AuditQuery): Promise<AuditRecord[]> {
  const where: string[] = [];
  const values: unknown[] = [];
  if (q.session !== undefined) {
    values.push(q.session);
    where.push(`session = $${values.length}`);
  }
  if (q.sinceMs !== undefined) {
    values.push(new Date(q.sinceMs).toISOString());
    where.push(`time >= $${values.length}`);
  }
  values.push(q.limit);
  const { rows } = await client.query<AuditRow>(
    `SELECT * FROM knowledgefs_audit ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY time DESC LIMIT $${values.length}`,
    values,
  );
  return rows.map((r) => ({
    time: r.time.toISOString(),
    replica: r.replica,
    session: r.session,
    kind: r.kind,
    creator: r.creator,
    team: r.team,
    scope: r.scope,
    action: r.action as AuditAction,
    rule: r.rule,
    membership: r.membership,
    result: r.result,
    requestId: r.request_id,
  }));
}
