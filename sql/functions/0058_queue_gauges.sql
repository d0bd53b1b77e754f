-- Per-lane gauges for /metrics (awa_queue_lag, awa_queue_available; src/metrics/
-- queue_gauges.cpp), for the queues in p_queues (NULL: every queue of the schema), in one
-- statement.
--
-- lag is exact and O(1) per lane (as queue_shard_lag: the enqueue cursor from the lane's
-- sequence minus the claim cursor). available counts committed, unclaimed, untombstoned
-- rows, which costs one index entry per row: for a deep backlog that is unbounded. With
-- p_cap set, a lane's count stops at p_cap rows and a lane that reaches it reports its lag
-- instead — an upper bound (it also counts rollback gaps, cancelled rows and reservations
-- in flight) that is exact for a lane without them. The cost is then at most p_cap index
-- entries per lane. p_cap NULL: exact counts, whatever they cost.
CREATE OR REPLACE FUNCTION {schema}.queue_lane_gauges(p_queues text[] DEFAULT NULL,
                                                      p_cap bigint DEFAULT NULL)
RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, lag bigint,
               available bigint)
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT qi.queue, claims.priority, claims.enqueue_shard, l.lag,
           CASE WHEN p_cap IS NOT NULL AND n.counted >= p_cap THEN greatest(l.lag, n.counted)
                ELSE n.counted END
    FROM {schema}.queue_claim_heads AS claims
    JOIN {schema}.queue_enqueue_heads AS enqueues USING (queue_id, priority, enqueue_shard)
    JOIN {schema}.queue_ids AS qi USING (queue_id)
    CROSS JOIN LATERAL (
        SELECT coalesce(pg_sequence_last_value(enqueues.seq), 0) + 1 - claims.claim_seq AS lag) l
    CROSS JOIN LATERAL (
        SELECT count(*) AS counted
        FROM (SELECT 1
              FROM {schema}.ready_entries r
              WHERE r.queue_id = claims.queue_id AND r.priority = claims.priority
                AND r.enqueue_shard = claims.enqueue_shard AND r.lane_seq >= claims.claim_seq
                AND NOT EXISTS (
                    SELECT 1 FROM {schema}.ready_tombstones t
                    WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id
                      AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                      AND t.lane_seq = r.lane_seq)
              LIMIT p_cap) s) n
    WHERE p_queues IS NULL OR qi.queue = ANY (p_queues)
    ORDER BY qi.queue COLLATE "C", claims.priority, claims.enqueue_shard
$$;
