-- One batcher flush (docs/runtime.md): every attempt closed through close_attempts.
-- $1 claim batches, $2 lane_seqs, $3 outcomes, $4 errors, $5 delays in seconds.
SELECT ord, state
FROM {schema}.close_attempts($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::double precision[])
