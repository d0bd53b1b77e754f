-- WorkflowAdmin::list_batches: $1 limit, $2 open only.
SELECT b::text FROM {schema}.batch_list($1::integer, $2::boolean) b
