-- The first statement of a self-committing enqueue with keyed rows: hold the queues'
-- reshard locks and check the shard counts the rows were routed with (40001 when one
-- changed; sql/functions/0022_shard_fences.sql). $1 queues, $2 counts (array literals).
SELECT {schema}.check_shard_counts($1::text[], $2::integer[])
