SELECT state, outcome FROM {schema}.set_job_priority($1::bigint, $2::integer)
