-- Admin::health: per queue with lanes, the age in seconds of its oldest available job,
-- NULL when none is available. The oldest job of a lane is taken to be its head — the
-- first committed, untombstoned row at or after the lane's claim cursor — found by one
-- index probe per lane (ready_entries' (queue_id, priority, enqueue_shard, lane_seq)
-- index), so the cost is bounded by the number of lanes, never by a backlog's depth.
-- Inside a lane rows sit in commit order, so the head is the oldest row but for a
-- promoted job whose run_at predates rows enqueued before its promotion. Live ring slots
-- only, as queue_counts_exact reads them.
WITH live AS (SELECT {schema}.ring_live_slots('queue') AS slots)
SELECT qi.queue,
       extract(epoch FROM clock_timestamp() - min(head.run_at))::float8
FROM {schema}.queue_claim_heads c
JOIN {schema}.queue_ids qi ON qi.queue_id = c.queue_id
CROSS JOIN live
LEFT JOIN LATERAL (
    SELECT r.run_at
    FROM {schema}.ready_entries r
    WHERE r.queue_id = c.queue_id AND r.priority = c.priority AND r.enqueue_shard = c.enqueue_shard
      AND r.lane_seq >= c.claim_seq AND r.ready_slot = ANY (live.slots)
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.ready_tombstones t
          WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id AND t.priority = r.priority
            AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
    ORDER BY r.lane_seq
    LIMIT 1) head ON true
GROUP BY qi.queue
ORDER BY qi.queue COLLATE "C"
