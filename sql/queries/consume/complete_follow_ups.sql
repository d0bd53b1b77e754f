-- A batcher flush in which some completions carry follow-up jobs (JobResult::then):
-- complete_results.sql with $6 the results (NULL when none has one) and $7 the follow-ups
-- (a JSON array per attempt, NULL where none), enqueued in this statement's transaction.
SELECT ord, state
FROM {schema}.close_attempts($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::double precision[],
                             $6::jsonb[], $7::jsonb[])
