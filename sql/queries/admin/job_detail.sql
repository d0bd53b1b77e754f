-- One job's detail, its open attempt's callback id, its result and its dependencies
-- (job_view).
SELECT job_id, state, queue, kind, priority, attempt, max_attempts, enqueue_shard,
       created_at, run_at, args, metadata, tags, ordering_key, lane_seq, run_lease, errors,
       progress, timeline, callback_id, result, dependencies
FROM {schema}.job_view($1::bigint)
