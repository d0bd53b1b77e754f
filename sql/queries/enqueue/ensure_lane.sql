-- $1 queue, $2 priority, $3 enqueue_shard.
SELECT lane_id, created FROM {schema}.ensure_lane($1, $2, $3)
