-- $1 queue, $2 max batch, $3 deadline (interval text or NULL), $4 aging (interval or NULL).
-- Read in binary format (Consumer::claim): no text output of the integers and timestamps
-- on the server, no parsing of them here. The queue is $1, so it is not returned; tags
-- come as their array text (parse_text_array), the one column whose binary form is not
-- simpler to read.
SELECT job_id, run_lease, attempt, enqueue_shard, ready_slot, lane_seq, claim_slot, claim_batch,
       priority, effective_priority, kind, args, metadata, tags::text, max_attempts,
       ordering_key, errors, run_at, created_at, claimed_at, deadline_at
FROM {schema}.claim_ready_runtime($1, $2, $3::interval, $4::interval)
