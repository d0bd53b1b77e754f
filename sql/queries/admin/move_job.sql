SELECT state, outcome FROM {schema}.move_queue($1::bigint, $2::text)
