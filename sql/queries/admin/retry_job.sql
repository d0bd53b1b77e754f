SELECT state, outcome FROM {schema}.retry_job($1::bigint)
