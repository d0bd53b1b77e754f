-- Read-only views for inspection and tests (docs/design/rings.md).

-- Every attempt end the rings still hold, one row per attempt, in the shape done_entries
-- had when it held successes too: a successful attempt is expanded from its claim
-- closure and hydrated from its ready row; every other end is its done_entries row.
-- History that prune removed is gone from here (its counts live in terminal_rollups).
-- queue is the name of queue_id (an inspection view: the join costs its readers only).
DROP VIEW IF EXISTS {schema}.attempt_outcomes;
CREATE VIEW {schema}.attempt_outcomes AS
SELECT r.ready_slot, b.queue_id, b.priority, b.enqueue_shard, s.lane_seq, r.job_id,
       r.run_lease + 1 AS run_lease, (r.attempt + 1)::smallint AS attempt,
       'completed'::text AS state, c.closed_at AS finished_at, NULL::text AS error,
       (SELECT i.queue FROM {schema}.queue_ids i WHERE i.queue_id = b.queue_id) AS queue
FROM {schema}.claim_closures c
JOIN {schema}.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
CROSS JOIN LATERAL unnest(c.lane_seqs) AS rg(closed)
CROSS JOIN LATERAL generate_series(lower(rg.closed), upper(rg.closed) - 1) AS s(lane_seq)
JOIN {schema}.ready_entries r
  ON r.queue_id = b.queue_id AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
 AND r.lane_seq = s.lane_seq
WHERE c.outcome = 'completed'
UNION ALL
SELECT d.ready_slot, d.queue_id, d.priority, d.enqueue_shard, d.lane_seq, d.job_id, d.run_lease,
       d.attempt, d.state, d.finished_at, d.error,
       (SELECT i.queue FROM {schema}.queue_ids i WHERE i.queue_id = d.queue_id)
FROM {schema}.done_entries d;
