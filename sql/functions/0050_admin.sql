-- Operator lookups (DESIGN.md §10).

-- Per lane of the queue: the enqueue cursor (next lane_seq a producer will reserve, read
-- from the lane's sequence, so it is exact and includes reservations not yet committed),
-- the claim cursor (next lane_seq a claimer will look at), lag = the difference (what
-- ADR-025's incident query reports: it counts rollback gaps and in-flight reservations
-- too), and available = the exact number of committed, unclaimed, not-cancelled rows.
-- Joins on the full lane key; never filters on enqueue_shard < current shard count.
CREATE OR REPLACE FUNCTION {schema}.queue_shard_lag(p_queue text)
RETURNS TABLE (priority smallint, enqueue_shard smallint, enqueue_cursor bigint,
               claim_cursor bigint, lag bigint, available bigint)
LANGUAGE sql STABLE AS $$
    SELECT claims.priority, claims.enqueue_shard,
           coalesce(pg_sequence_last_value(enqueues.seq), 0) + 1 AS enqueue_cursor,
           claims.claim_seq AS claim_cursor,
           coalesce(pg_sequence_last_value(enqueues.seq), 0) + 1 - claims.claim_seq AS lag,
           (SELECT count(*)
            FROM {schema}.ready_entries r
            WHERE r.queue = claims.queue AND r.priority = claims.priority
              AND r.enqueue_shard = claims.enqueue_shard AND r.lane_seq >= claims.claim_seq
              AND NOT EXISTS (
                  SELECT 1 FROM {schema}.ready_tombstones t
                  WHERE t.ready_slot = r.ready_slot AND t.queue = r.queue AND t.priority = r.priority
                    AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)) AS available
    FROM {schema}.queue_claim_heads AS claims
    JOIN {schema}.queue_enqueue_heads AS enqueues USING (queue, priority, enqueue_shard)
    WHERE claims.queue = p_queue
    ORDER BY claims.priority, claims.enqueue_shard
$$;
