-- Admin::shard_claims: jobs claimed from queue $1 per lane and minute over the last $2
-- whole minutes, the current one included. A claim call writes one claim_batches row
-- (n_items attempts, claimed_at) per lane it took from; every attempt counts, retries
-- included. One row per (lane, minute) with claims, plus one row with NULL lane columns
-- when there were none; every row carries the window's first minute (now() read once).
-- Batches prune removed for good are counted from minute_rollups (migration 0005), which
-- prune fills in the same transaction as its TRUNCATE, so one statement counts each batch
-- exactly once. claim_batches_claimed_at (migration 0002) and the rollups' key make both
-- range scans; bounded above for a caller transaction whose now() lags.
WITH w AS (
    SELECT date_trunc('minute', now()) - make_interval(mins => $2::int - 1) AS start,
           date_trunc('minute', now()) + interval '1 minute' AS stop),
claimed AS (
    SELECT b.priority, b.enqueue_shard, date_trunc('minute', b.claimed_at) AS minute,
           b.n_items::bigint AS claims
    FROM {schema}.claim_batches b
    WHERE b.claimed_at >= (SELECT start FROM w) AND b.claimed_at < (SELECT stop FROM w)
      AND b.queue_id = (SELECT i.queue_id FROM {schema}.queue_ids i WHERE i.queue = $1::text)
    UNION ALL
    SELECT r.priority, r.enqueue_shard, r.minute, r.claims
    FROM {schema}.minute_rollups r
    WHERE r.minute >= (SELECT start FROM w) AND r.minute < (SELECT stop FROM w)
      AND r.queue_id = (SELECT i.queue_id FROM {schema}.queue_ids i WHERE i.queue = $1::text)
      AND r.claims > 0),
per_minute AS (
    SELECT c.priority, c.enqueue_shard, c.minute, sum(c.claims)::bigint AS claims
    FROM claimed c
    GROUP BY c.priority, c.enqueue_shard, c.minute)
SELECT to_char(w.start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS start,
       p.priority,
       p.enqueue_shard,
       (extract(epoch FROM p.minute - w.start) / 60)::int AS bucket,
       p.claims
FROM w
LEFT JOIN per_minute p ON true
ORDER BY p.priority, p.enqueue_shard, bucket
