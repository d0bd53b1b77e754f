-- The leader's re-check of waiting jobs committed since its last round
-- (verify_waiting_jobs, sql/functions/0067_dependencies.sql). $1: at most this many jobs.
SELECT {schema}.verify_waiting_jobs($1::integer)
