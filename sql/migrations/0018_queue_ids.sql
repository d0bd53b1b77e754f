-- Fixed-width queue keys (docs/design/storage.md, "Queue ids").
--
-- The hot tables keyed a queue by its name, a text column in every primary key and in
-- every row of the rings. From here on they key it by queue_id: a four-byte integer given
-- to each queue name once, on the first lane of the queue (ensure_lane), and never reused
-- nor changed. Names stay the interface: every function takes and returns queue names and
-- translates at its edge; the C++ producer caches the id with the shard count.
--
-- Tables that stay keyed by name: queue_meta (one row per configured queue), deferred_jobs
-- and dlq_entries (no lane, read by name), enqueue_staging (rows live inside one
-- transaction), periodic_jobs and queue_rate_buckets (one small row per queue or
-- schedule).
--
-- Existing rows are converted in place: every queue name found in a hot table gets its
-- id (in name order), the new column is filled from it, the name column is dropped (its
-- primary keys and indexes with it) and the keys are rebuilt on the id in the same logical
-- order. Workers of older builds cannot run against the result (they write names), so
-- migrate refuses to apply this migration while such workers look alive
-- (docs/upgrading.md).

CREATE SEQUENCE {schema}.queue_id_seq AS integer;

CREATE TABLE {schema}.queue_ids (
    queue      text        PRIMARY KEY,
    queue_id   integer     NOT NULL UNIQUE DEFAULT nextval('{schema}.queue_id_seq'),
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE {schema}.queue_id_seq OWNED BY {schema}.queue_ids.queue_id;

-- Rebuilt by the function files (sql/functions/0090_views.sql) on the new columns.
DROP VIEW IF EXISTS {schema}.attempt_outcomes;

INSERT INTO {schema}.queue_ids (queue)
SELECT q.queue
FROM (SELECT queue FROM {schema}.queue_enqueue_heads
      UNION SELECT queue FROM {schema}.queue_claim_heads
      UNION SELECT queue FROM {schema}.ready_entries
      UNION SELECT queue FROM {schema}.done_entries
      UNION SELECT queue FROM {schema}.ready_tombstones
      UNION SELECT queue FROM {schema}.claim_batches
      UNION SELECT queue FROM {schema}.leases
      UNION SELECT queue FROM {schema}.terminal_rollups
      UNION SELECT queue FROM {schema}.minute_rollups
      UNION SELECT queue FROM {schema}.shard_fences) AS q
ORDER BY q.queue;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['queue_enqueue_heads', 'queue_claim_heads', 'ready_entries',
                             'done_entries', 'ready_tombstones', 'claim_batches', 'leases',
                             'terminal_rollups', 'minute_rollups', 'shard_fences'] LOOP
        EXECUTE format('ALTER TABLE %s.%I ADD COLUMN queue_id integer', '{schema}', t);
        EXECUTE format('UPDATE %s.%I AS x SET queue_id = q.queue_id FROM %s.queue_ids q WHERE q.queue = x.queue',
                       '{schema}', t, '{schema}');
        EXECUTE format('ALTER TABLE %s.%I ALTER COLUMN queue_id SET NOT NULL', '{schema}', t);
        -- drops the primary key and the indexes that include the name
        EXECUTE format('ALTER TABLE %s.%I DROP COLUMN queue', '{schema}', t);
    END LOOP;
END
$$;

ALTER TABLE {schema}.queue_enqueue_heads ADD PRIMARY KEY (queue_id, priority, enqueue_shard);
ALTER TABLE {schema}.queue_claim_heads ADD PRIMARY KEY (queue_id, priority, enqueue_shard);
ALTER TABLE {schema}.ready_entries ADD PRIMARY KEY (ready_slot, queue_id, priority, enqueue_shard, lane_seq);
ALTER TABLE {schema}.done_entries ADD PRIMARY KEY (ready_slot, queue_id, priority, enqueue_shard, lane_seq);
ALTER TABLE {schema}.ready_tombstones ADD PRIMARY KEY (ready_slot, queue_id, priority, enqueue_shard, lane_seq);
ALTER TABLE {schema}.leases ADD PRIMARY KEY (lease_slot, queue_id, priority, enqueue_shard, lane_seq);
ALTER TABLE {schema}.terminal_rollups ADD PRIMARY KEY (queue_id, state);
ALTER TABLE {schema}.minute_rollups ADD PRIMARY KEY (queue_id, minute, priority, enqueue_shard);
ALTER TABLE {schema}.shard_fences ADD PRIMARY KEY (queue_id, epoch, priority, enqueue_shard);
CREATE INDEX claim_batches_queue ON {schema}.claim_batches (queue_id, batch_id) INCLUDE (n_items);
