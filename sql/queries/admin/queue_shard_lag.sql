SELECT priority, enqueue_shard, enqueue_cursor, claim_cursor, lag, available
FROM {schema}.queue_shard_lag($1)
