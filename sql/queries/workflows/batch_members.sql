-- WorkflowAdmin::batch_members: $1 name, $2 limit, $3 after this job id.
SELECT {schema}.batch_members_json($1::text, $2::integer, $3::bigint)::text
