-- refresh_queue_gauges (src/storage/queue_gauges.cpp): per lane, its lag and available
-- rows. $1 queues (text[] literal, or NULL: every queue), $2 cap on each lane's count
-- (NULL: exact; see sql/functions/0058_queue_gauges.sql).
SELECT queue, priority, enqueue_shard, lag, available
FROM {schema}.queue_lane_gauges($1::text[], $2::bigint)
