SELECT job_id, state, queue, kind, priority, attempt, max_attempts, enqueue_shard, created_at,
       run_at, args, metadata, tags::text, ordering_key, lane_seq, run_lease, errors::text,
       progress, timeline::text
FROM {schema}.job_detail($1::bigint)
