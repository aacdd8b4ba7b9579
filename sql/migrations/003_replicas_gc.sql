-- knowledgefs-migration: expand
-- Additive: two new tables, nothing existing changes, so replicas of the
-- previous release keep working against it and start beside it (they do not
-- report what they serve: docs/OPERATIONS.md#rolling-upgrades-and-migrations).
--
-- The publications replicas serve, for `knowledgefs gc`: each `serve --store`
-- replica upserts one row per publication it serves (its current one and
-- the previous one it still answers opens for) every few seconds. gc keeps
-- every publication with a heartbeat within its grace. `pointer` is the
-- pointer itself (current.json's bytes as JSON), so gc needs nothing else
-- to know what the publication names.
CREATE TABLE knowledgefs_replicas (
  replica_id text NOT NULL,
  -- sha256 of the pointer's bytes.
  publication text NOT NULL,
  pointer jsonb NOT NULL,
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (replica_id, publication)
);

CREATE INDEX knowledgefs_replicas_by_heartbeat ON knowledgefs_replicas (heartbeat_at);

-- At most one gc deleting at a time: the one row, held until expires_at
-- (renewed while it runs); a killed gc's row is taken over once expired.
CREATE TABLE knowledgefs_gc_lock (
  store text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
