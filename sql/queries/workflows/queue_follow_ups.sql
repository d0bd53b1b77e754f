-- WorkflowAdmin::queue_follow_ups: $1 queue (NULL: every queue).
SELECT {schema}.queue_follow_ups_json($1::text)::text
