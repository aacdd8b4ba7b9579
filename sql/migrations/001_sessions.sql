-- knowledgefs-migration: contract
-- (The baseline every release needs: recorded where every release looks.
-- Kinds and what an operator does for each: docs/OPERATIONS.md#rolling-upgrades-and-migrations.)
--
-- Session state of the scale-out mode. Only the sha256 of a session's token
-- is stored. `version` increases with every change of a session (its row or
-- its read set); replicas apply the changes they are notified of in version
-- order and reload a session when they see a gap.
CREATE TABLE knowledgefs_sessions (
  id text PRIMARY KEY,
  token_hash text NOT NULL UNIQUE,
  kind text NOT NULL CHECK (kind IN ('team', 'personal')),
  creator text NOT NULL,
  team text,
  revoked boolean NOT NULL DEFAULT false,
  -- Team ids in mount order.
  mounted text[] NOT NULL DEFAULT '{}',
  created_at text NOT NULL,
  version bigint NOT NULL DEFAULT 0
);

-- Read order across all sessions: a session's read set is its rows by read_order.
CREATE SEQUENCE knowledgefs_read_order;

CREATE TABLE knowledgefs_read_set (
  session_id text NOT NULL REFERENCES knowledgefs_sessions (id),
  path text NOT NULL,
  sha256 text NOT NULL,
  read_order bigint NOT NULL DEFAULT nextval('knowledgefs_read_order'),
  PRIMARY KEY (session_id, path)
);

CREATE INDEX knowledgefs_read_set_by_order ON knowledgefs_read_set (session_id, read_order);

-- One read-tool read, in one round trip: lock the session, mount the team if
-- asked and not mounted yet, upsert the read-set entry (a re-read moves it to
-- the end), keep at most p_keep entries (NULL: below the cap, nothing to
-- forget), bump the version and notify the
-- replicas with `<id> <version> <p_change>`. No row: no such session.
CREATE FUNCTION knowledgefs_record_read(
  p_id text, p_path text, p_sha256 text, p_team text, p_keep integer, p_change text
) RETURNS TABLE (version bigint, newly boolean) LANGUAGE plpgsql AS $$
DECLARE
  old_mounted text[];
  mounts boolean;
  v bigint;
BEGIN
  SELECT s.mounted INTO old_mounted FROM knowledgefs_sessions s WHERE s.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  mounts := p_team IS NOT NULL AND NOT (p_team = ANY (old_mounted));
  UPDATE knowledgefs_sessions s
  SET version = s.version + 1,
      mounted = CASE WHEN mounts THEN array_append(s.mounted, p_team) ELSE s.mounted END
  WHERE s.id = p_id
  RETURNING s.version INTO v;
  INSERT INTO knowledgefs_read_set AS r (session_id, path, sha256) VALUES (p_id, p_path, p_sha256)
  ON CONFLICT (session_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256, read_order = nextval('knowledgefs_read_order');
  IF p_keep IS NOT NULL THEN
    DELETE FROM knowledgefs_read_set r
    WHERE r.session_id = p_id AND r.read_order < (
      SELECT k.read_order FROM knowledgefs_read_set k WHERE k.session_id = p_id
      ORDER BY k.read_order DESC OFFSET p_keep - 1 LIMIT 1);
  END IF;
  PERFORM pg_notify('knowledgefs_sessions', p_id || ' ' || v || ' ' || p_change);
  RETURN QUERY SELECT v, mounts;
END;
$$;
