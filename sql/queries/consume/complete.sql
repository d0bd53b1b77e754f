-- The fused completion statement: one per batcher flush (DESIGN.md §7).
--
-- Every row names its attempt by (job_id, run_lease) plus the ready row's key and the
-- receipt's claim slot, as the claim returned them. An attempt is closed by inserting its
-- done_entries row on the ready row's own (ready_slot, queue, priority, enqueue_shard,
-- lane_seq) key with ON CONFLICT DO NOTHING: that key is the per-attempt lock shared by
-- every path that closes an attempt (completion, cancel, rescue), so the first closer wins
-- and a completion arriving after a rescue or cancel matches nothing — it is reported
-- as stale and changes nothing.
--
-- Outcomes: completed; retry (a retryable failure: deferred with the given delay while
-- attempts remain, else failed / dlq); fail (terminal: failed / dlq); snooze (deferred,
-- the attempt is given back); cancel.
WITH input AS MATERIALIZED (
    SELECT *
    FROM unnest($1::bigint[], $2::bigint[], $3::smallint[], $4::smallint[], $5::text[],
                $6::smallint[], $7::smallint[], $8::bigint[], $9::text[], $10::text[],
                $11::double precision[], $12::smallint[])
        AS t(job_id, run_lease, claim_slot, ready_slot, queue, priority, enqueue_shard,
             lane_seq, outcome, error, delay_s, max_attempts)),
matched AS MATERIALIZED (
    SELECT i.*, lc.attempt
    FROM input i
    JOIN {schema}.lease_claims lc
      ON lc.claim_slot = i.claim_slot AND lc.job_id = i.job_id AND lc.run_lease = i.run_lease
     AND lc.ready_slot = i.ready_slot AND lc.queue = i.queue AND lc.priority = i.priority
     AND lc.enqueue_shard = i.enqueue_shard AND lc.lane_seq = i.lane_seq),
decided AS MATERIALIZED (
    SELECT m.*,
           CASE m.outcome
               WHEN 'completed' THEN 'completed'
               WHEN 'cancel' THEN 'cancelled'
               WHEN 'snooze' THEN 'snoozed'
               WHEN 'retry' THEN
                   CASE WHEN m.attempt < m.max_attempts THEN 'retried'
                        WHEN coalesce(q.dlq_enabled, false) THEN 'dlq'
                        ELSE 'failed' END
               WHEN 'fail' THEN
                   CASE WHEN coalesce(q.dlq_enabled, false) THEN 'dlq' ELSE 'failed' END
           END AS state
    FROM matched m
    LEFT JOIN {schema}.queue_meta q ON q.queue = m.queue),
closed AS (
    INSERT INTO {schema}.done_entries
        (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt,
         state, error)
    SELECT d.ready_slot, d.queue, d.priority, d.enqueue_shard, d.lane_seq, d.job_id,
           d.run_lease, d.attempt, d.state, d.error
    FROM decided d
    ON CONFLICT DO NOTHING
    RETURNING ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, state, attempt, error),
followup AS MATERIALIZED (
    SELECT c.state, c.error, c.attempt AS closed_attempt, d.delay_s, r.*
    FROM closed c
    JOIN decided d ON d.job_id = c.job_id AND d.lane_seq = c.lane_seq
    JOIN {schema}.ready_entries r
      ON r.ready_slot = c.ready_slot AND r.queue = c.queue AND r.priority = c.priority
     AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq
    WHERE c.state IN ('retried', 'snoozed', 'dlq')),
deferred AS (
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
         created_at, ordering_key, metadata, tags, errors, reason)
    SELECT f.job_id, f.queue, f.priority, f.kind, f.args,
           -- a snooze gives the attempt back; a retry has consumed it
           CASE WHEN f.state = 'snoozed' THEN f.closed_attempt - 1 ELSE f.closed_attempt END,
           f.run_lease + 1, f.max_attempts,
           now() + make_interval(secs => greatest(coalesce(f.delay_s, 0), 0)),
           f.created_at, f.ordering_key, f.metadata, f.tags,
           CASE WHEN f.state = 'retried'
                THEN {schema}.append_error(f.errors, f.closed_attempt, f.error)
                ELSE f.errors END,
           CASE WHEN f.state = 'snoozed' THEN 'snooze' ELSE 'retry' END
    FROM followup f
    WHERE f.state IN ('retried', 'snoozed')),
dead AS (
    INSERT INTO {schema}.dlq_entries
        (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, created_at,
         ordering_key, metadata, tags, errors, reason)
    SELECT f.job_id, f.queue, f.priority, f.kind, f.args, f.closed_attempt, f.run_lease + 1,
           f.max_attempts, f.created_at, f.ordering_key, f.metadata, f.tags,
           {schema}.append_error(f.errors, f.closed_attempt, f.error),
           coalesce(f.error, 'failed')
    FROM followup f
    WHERE f.state = 'dlq'),
-- A materialised attempt's lease row ends with the attempt (normally there is none).
gone AS (
    DELETE FROM {schema}.leases l
    USING closed c
    WHERE l.queue = c.queue AND l.priority = c.priority AND l.enqueue_shard = c.enqueue_shard
      AND l.lane_seq = c.lane_seq AND l.job_id = c.job_id)
SELECT job_id, run_lease, state FROM closed
