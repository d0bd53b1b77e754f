-- ADR-025's operator procedure, step 1.
INSERT INTO {schema}.queue_meta (queue, enqueue_shards)
VALUES ($1, $2)
ON CONFLICT (queue)
DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards, updated_at = now()
RETURNING enqueue_shards
