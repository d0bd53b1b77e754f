-- The maintenance leader's lease (docs/deployment.md, "Behind a transaction pooler"): the
-- election of a client that has no session to hold an advisory lock in (ClientOptions::
-- pooled without a direct_database_url). One row per schema (this table lives in it):
--   holder       the leading instance (runtime_instances.instance_id, as text), or NULL;
--   expires_at   it leads until then unless it renews first ('-infinity': free);
--   acquired_at  when the current holder took it (for operators).
-- sql/queries/runtime/lease_acquire.sql takes an expired lease or renews its own in one
-- statement. Logged, not UNLOGGED: a crash must not leave the schema without its row (the
-- acquire re-creates a missing row anyway). Rewritten once per maintenance interval by
-- the leader only: HOT updates, hence the fillfactor.
CREATE TABLE {schema}.leader_lease (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    holder      text,
    expires_at  timestamptz NOT NULL DEFAULT '-infinity',
    acquired_at timestamptz
) WITH (fillfactor = 50);

INSERT INTO {schema}.leader_lease DEFAULT VALUES;
