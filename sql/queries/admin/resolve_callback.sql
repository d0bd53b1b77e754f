-- $1 callback id, $2 outcome (completed, retry, fail), $3 error text or NULL, $4 the
-- result (JSON text, completed only) or NULL.
SELECT job_id, state FROM {schema}.resolve_callback($1::uuid, $2, $3, $4::jsonb)
