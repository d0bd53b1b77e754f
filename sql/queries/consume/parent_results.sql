-- A job's parents' results, for JobContext::parent_results() (parent_results,
-- sql/functions/0067_dependencies.sql). $1: the job's id.
SELECT r.parent_id, r.result::text
FROM {schema}.parent_results($1::bigint) r
