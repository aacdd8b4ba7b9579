-- knowledgefs-migration: expand
-- Additive: a new table that replicas of 0.1.0 never touch.
--
-- The fleet's decision log (`serve --audit-log postgres`): one row per
-- CanLoadScope decision, from every replica. Partitioned by day on `time`;
-- the replicas create each day's partition ahead of time and drop the ones
-- older than --audit-retention (pg-audit-partitions.ts), so old decisions
-- go a day at a time without a DELETE.
CREATE TABLE knowledgefs_audit (
  time timestamptz NOT NULL,
  replica text NOT NULL,
  session text NOT NULL,
  kind text NOT NULL,
  creator text NOT NULL,
  team text,
  scope text NOT NULL,
  action text NOT NULL,
  rule text NOT NULL,
  membership jsonb,
  result text NOT NULL,
  request_id text
) PARTITION BY RANGE (time);

-- "What did session X get?" reads one session's rows by time.
CREATE INDEX knowledgefs_audit_by_session ON knowledgefs_audit (session, time);
CREATE INDEX knowledgefs_audit_by_time ON knowledgefs_audit (time);
