COPY {schema}.ready_entries
    (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
     max_attempts, run_at, created_at, ordering_key, metadata, tags)
FROM STDIN (FORMAT binary)
