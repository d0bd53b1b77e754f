-- awa job list: $1 queue, $2 state, $3 kind, $4 after (ids greater than), $5 limit; NULL:
-- any. One reading statement, one snapshot: each job once (job_list, job_states).
SELECT job_id, state, queue, kind, priority, attempt, max_attempts, enqueue_shard,
       created_at, run_at
FROM {schema}.job_list($1::text, $2::text, $3::text, $4::bigint, $5::integer)
