-- A batcher flush in which some successes carry a result (JobResult::completed(json)):
-- complete.sql with $6 the results (JSON, NULL where none), kept with the completed jobs.
SELECT ord, state
FROM {schema}.close_attempts($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::double precision[],
                             $6::jsonb[])
