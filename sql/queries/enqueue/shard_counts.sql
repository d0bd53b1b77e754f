SELECT queue, enqueue_shards FROM {schema}.queue_meta WHERE queue = ANY($1::text[])
