-- One job's detail (job_detail), plus the callback id its open attempt registered, if any
-- (leases.callback_id: what an operator passes to `awa callback complete|fail`), and the
-- result a completed job's callback answered with (its done row, migration 0011).
SELECT d.job_id, d.state, d.queue, d.kind, d.priority, d.attempt, d.max_attempts,
       d.enqueue_shard, d.created_at, d.run_at, d.args, d.metadata, d.tags::text,
       d.ordering_key, d.lane_seq, d.run_lease, d.errors::text, d.progress, d.timeline::text,
       (SELECT l.callback_id::text
        FROM {schema}.job_states($1::bigint) s
        JOIN {schema}.leases l ON l.claim_batch = s.claim_batch AND l.lane_seq = s.lane_seq
        WHERE l.callback_id IS NOT NULL) AS callback_id,
       CASE WHEN d.state = 'completed' THEN
           (SELECT x.result::text FROM {schema}.done_entries x
            WHERE x.job_id = $1::bigint AND x.state = 'completed' AND x.run_lease = d.run_lease
              AND x.result IS NOT NULL
            LIMIT 1)
       END AS result
FROM {schema}.job_detail($1::bigint) d
