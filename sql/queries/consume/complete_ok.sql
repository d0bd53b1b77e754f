-- The completion batcher's common case: every row of the flush completed. The same per-
-- attempt lock as complete.sql (the done_entries key, ON CONFLICT DO NOTHING), with the
-- lane key taken from the receipt, so the client sends three small arrays instead of
-- twelve and the statement skips the outcome logic.
WITH input AS (
    SELECT *
    FROM unnest($1::bigint[], $2::bigint[], $3::smallint[]) AS t(job_id, run_lease, claim_slot)),
closed AS (
    INSERT INTO {schema}.done_entries
        (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state)
    SELECT lc.ready_slot, lc.queue, lc.priority, lc.enqueue_shard, lc.lane_seq, lc.job_id,
           lc.run_lease, lc.attempt, 'completed'
    FROM input i
    JOIN {schema}.lease_claims lc
      ON lc.claim_slot = i.claim_slot AND lc.job_id = i.job_id AND lc.run_lease = i.run_lease
    ON CONFLICT DO NOTHING
    RETURNING queue, priority, enqueue_shard, lane_seq, job_id, run_lease),
gone AS (
    DELETE FROM {schema}.leases l
    USING closed c
    WHERE l.queue = c.queue AND l.priority = c.priority AND l.enqueue_shard = c.enqueue_shard
      AND l.lane_seq = c.lane_seq AND l.job_id = c.job_id)
SELECT job_id, run_lease, 'completed' FROM closed
