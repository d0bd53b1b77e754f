-- Admin::throughput: job ends per queue and minute over the last $1 whole minutes, the
-- current one included ($2: one queue, or NULL for every queue). One row per (queue,
-- minute) that had an end, plus one row with a NULL queue when nothing ended; every row
-- carries the window's first minute, so the caller's buckets and this statement's agree
-- (now() is read once, here).
--   completed  a success writes no per-job row: its claim_closures row (outcome
--              'completed', n_closed attempts, closed_at) counts it; done_entries rows in
--              state 'completed' (from before migration 0002, or a success that kept a
--              callback's result, whose closure is 'closed') count too.
--   failed     the done_entries row of an attempt that ended the job: 'failed' or 'dlq'.
--              Retried, snoozed, rescued and cancelled attempts are not job ends.
-- History that prune removed for good is counted from minute_rollups (migration 0005),
-- which prune fills in the same transaction as its TRUNCATE: each end is in exactly one
-- of the three sources at any snapshot, and this is one statement, so the counts are
-- exact across prunes (rollup rows that hold only claims are not ends).
-- Every scan is a range scan on the time column (BRIN for the ring tables, the rollups'
-- B-tree), bounded above too so a long-running caller transaction, whose now() lags,
-- never gets an out-of-range bucket.
WITH w AS (
    SELECT date_trunc('minute', now()) - make_interval(mins => $1::int - 1) AS start,
           date_trunc('minute', now()) + interval '1 minute' AS stop),
one AS (SELECT {schema}.queue_id_of($2::text) AS queue_id),
ends AS (
    SELECT b.queue_id, c.closed_at AS at, c.n_closed::bigint AS completed, 0::bigint AS failed
    FROM {schema}.claim_closures c
    JOIN {schema}.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
    WHERE c.closed_at >= (SELECT start FROM w) AND c.closed_at < (SELECT stop FROM w)
      AND c.outcome = 'completed' AND ($2::text IS NULL OR b.queue_id = (SELECT queue_id FROM one))
    UNION ALL
    SELECT d.queue_id, d.finished_at, (d.state = 'completed')::int::bigint,
           (d.state <> 'completed')::int::bigint
    FROM {schema}.done_entries d
    WHERE d.finished_at >= (SELECT start FROM w) AND d.finished_at < (SELECT stop FROM w)
      AND d.state IN ('completed', 'failed', 'dlq') AND ($2::text IS NULL OR d.queue_id = (SELECT queue_id FROM one))
    UNION ALL
    SELECT r.queue_id, r.minute, r.completed, r.failed
    FROM {schema}.minute_rollups r
    WHERE r.minute >= (SELECT start FROM w) AND r.minute < (SELECT stop FROM w)
      AND (r.completed > 0 OR r.failed > 0) AND ($2::text IS NULL OR r.queue_id = (SELECT queue_id FROM one))),
per_minute AS (
    SELECT qi.queue, date_trunc('minute', e.at) AS minute, sum(e.completed)::bigint AS completed,
           sum(e.failed)::bigint AS failed
    FROM ends e
    JOIN {schema}.queue_ids qi ON qi.queue_id = e.queue_id
    GROUP BY qi.queue, date_trunc('minute', e.at))
SELECT to_char(w.start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS start,
       p.queue,
       (extract(epoch FROM p.minute - w.start) / 60)::int AS bucket,
       p.completed,
       p.failed
FROM w
LEFT JOIN per_minute p ON true
ORDER BY p.queue COLLATE "C", bucket
