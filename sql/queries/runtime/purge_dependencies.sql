-- The leader's retention of dependency edges (purge_dependencies,
-- sql/functions/0067_dependencies.sql). $1: keep edges applied less than this long ago.
SELECT {schema}.purge_dependencies($1::interval)
