-- Every queue of $1 with its shard count (no queue_meta row: 1) and its id in the hot
-- tables (NULL until its first lane gives it one), read together and cached together.
SELECT q.queue, coalesce(m.enqueue_shards, 1)::integer, i.queue_id
FROM unnest($1::text[]) AS q(queue)
LEFT JOIN {schema}.queue_meta m ON m.queue = q.queue
LEFT JOIN {schema}.queue_ids i ON i.queue = q.queue
