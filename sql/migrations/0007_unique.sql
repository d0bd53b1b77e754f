-- Unique jobs (issue 14; docs/scheduling.md "Unique jobs"). One row per unique key that a
-- job has held: the key's current holder and the states in which it holds it. Rows are
-- never tied to a ring: a key outlives its job's rows, and a holder that left its states
-- (or whose rows were pruned) is replaced lazily, by the next insert of an equal job
-- (claim_unique_key), so the completion path never touches this table.
--   key     sha256 of the canonical key parts (unique_key()); never the enqueue shard;
--   job_id  the job holding the key;
--   states  the job states in which it holds it (job_states() names).
CREATE TABLE {schema}.unique_keys (
    key        bytea       PRIMARY KEY,
    job_id     bigint      NOT NULL,
    states     text[]      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
