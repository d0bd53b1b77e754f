-- chaos.outcomes = awa.attempt_outcomes with the success expansion materialised first (the view
-- joins quadratically on fresh tables); chaos.ready = the ready rows. A script, no parameters.
SET client_min_messages = warning;
DROP TABLE IF EXISTS chaos.outcomes, chaos.ready;
ANALYZE awa.ready_entries, awa.claim_batches, awa.claim_closures, awa.done_entries;
CREATE TABLE chaos.ready AS
SELECT queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt FROM awa.ready_entries;
CREATE INDEX ON chaos.ready (job_id);
CREATE TABLE chaos.outcomes AS
WITH closed AS MATERIALIZED (
    SELECT b.queue_id, b.priority, b.enqueue_shard, s.lane_seq, c.closed_at
    FROM awa.claim_closures c
    JOIN awa.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
    CROSS JOIN LATERAL unnest(c.lane_seqs) AS rg(closed)
    CROSS JOIN LATERAL generate_series(lower(rg.closed), upper(rg.closed) - 1) AS s(lane_seq)
    WHERE c.outcome = 'completed')
SELECT r.job_id, r.run_lease + 1 AS run_lease, r.attempt + 1 AS attempt, 'completed'::text AS state,
       c.closed_at AS finished_at
FROM closed c
JOIN chaos.ready r USING (queue_id, priority, enqueue_shard, lane_seq)
UNION ALL
SELECT d.job_id, d.run_lease, d.attempt, d.state, d.finished_at FROM awa.done_entries d;
CREATE INDEX ON chaos.outcomes (job_id);
ANALYZE chaos.ready, chaos.outcomes
