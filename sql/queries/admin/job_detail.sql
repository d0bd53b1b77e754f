-- One job's detail (job_detail), plus the callback id its open attempt registered, if any
-- (leases.callback_id: what an operator passes to `awa callback complete|fail`).
SELECT d.job_id, d.state, d.queue, d.kind, d.priority, d.attempt, d.max_attempts,
       d.enqueue_shard, d.created_at, d.run_at, d.args, d.metadata, d.tags::text,
       d.ordering_key, d.lane_seq, d.run_lease, d.errors::text, d.progress, d.timeline::text,
       (SELECT l.callback_id::text
        FROM {schema}.job_states($1::bigint) s
        JOIN {schema}.leases l ON l.claim_batch = s.claim_batch AND l.lane_seq = s.lane_seq
        WHERE l.callback_id IS NOT NULL) AS callback_id
FROM {schema}.job_detail($1::bigint) d
