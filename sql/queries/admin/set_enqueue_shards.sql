-- Sets a queue's shard count (docs/operations.md, "Raising `enqueue_shards`", step 2).
INSERT INTO {schema}.queue_meta (queue, enqueue_shards)
VALUES ($1, $2)
ON CONFLICT (queue)
DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards, updated_at = now()
RETURNING enqueue_shards
