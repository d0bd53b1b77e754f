-- $1 claim batches, $2 lane_seqs, $3 job ids, $4 run leases, $5 ready slots, $6 attempts,
-- $7 progress (jsonb or NULL per attempt).
SELECT job_id, run_lease
FROM {schema}.heartbeat_attempts($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[],
                                 $5::smallint[], $6::smallint[], $7::jsonb[])
