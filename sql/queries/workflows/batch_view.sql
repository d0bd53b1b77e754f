-- WorkflowAdmin::batch: $1 name; NULL when there is no such batch.
SELECT {schema}.batch_view($1::text)::text
