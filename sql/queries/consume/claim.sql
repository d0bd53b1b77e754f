-- $1 queue, $2 max batch, $3 deadline (interval text or NULL), $4 aging (interval or NULL).
SELECT job_id, run_lease, attempt, enqueue_shard, ready_slot, lane_seq, claim_slot, claim_batch,
       queue, priority, effective_priority, kind, args, metadata, tags, max_attempts,
       ordering_key, errors, run_at, created_at, claimed_at, deadline_at
FROM {schema}.claim_ready_runtime($1, $2, $3::interval, $4::interval)
