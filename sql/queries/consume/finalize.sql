-- QueueStorage::finalize_in: the attempt completed inside the caller's transaction.
-- $1 claim batch, $2 lane_seq, $3 the result (JSON, or NULL).
SELECT {schema}.finalize_attempt($1::bigint, $2::bigint, $3::jsonb)
