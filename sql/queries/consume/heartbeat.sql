SELECT job_id, run_lease
FROM {schema}.heartbeat_attempts($1::bigint[], $2::bigint[], $3::smallint[], $4::jsonb[])
