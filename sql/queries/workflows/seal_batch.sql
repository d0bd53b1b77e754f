-- WorkflowAdmin::seal_batch: $1 name.
SELECT {schema}.seal_batch($1::text)::text
