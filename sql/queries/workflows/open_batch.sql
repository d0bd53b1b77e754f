-- WorkflowAdmin::open_batch: $1 name, $2 completion kind (NULL: none), $3 queue, $4 args.
SELECT {schema}.open_batch($1::text, $2::text, $3::text, $4::jsonb)::text
