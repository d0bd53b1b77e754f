-- WorkflowAdmin::set_queue_follow_up / clear_queue_follow_up: $1 queue, $2 trigger,
-- $3 kind (NULL: remove), $4 target queue (NULL: the same queue).
SELECT {schema}.set_queue_follow_up($1::text, $2::text, $3::text, $4::text)::text
