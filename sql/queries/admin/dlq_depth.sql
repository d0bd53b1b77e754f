SELECT queue, count(*) FROM {schema}.dlq_entries GROUP BY queue ORDER BY queue COLLATE "C"
