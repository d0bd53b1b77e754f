SELECT job_id, state, why FROM {schema}.rescue_stale_attempts($1::interval, $2)
