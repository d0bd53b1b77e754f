-- $1 callback id, $2 outcome (completed, retry, fail), $3 error text or NULL.
SELECT job_id, state FROM {schema}.resolve_callback($1::uuid, $2, $3)
