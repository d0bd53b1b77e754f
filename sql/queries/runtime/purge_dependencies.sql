-- The leader's retention of workflow history: dependency edges (purge_dependencies,
-- sql/functions/0067_dependencies.sql) and finished batches with their members
-- (purge_batches, 0069_batches.sql). $1: keep what ended less than this long ago.
SELECT {schema}.purge_dependencies($1::interval) + {schema}.purge_batches($1::interval)
