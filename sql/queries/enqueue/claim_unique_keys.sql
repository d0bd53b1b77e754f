-- The unique jobs of a call with several jobs: their keys claimed in key order before any
-- job is written (claim_unique_keys, sql/functions/0025_unique.sql). $1 kinds, $2 queues,
-- $3 args, $4 run_at (NULL: now), $5 unique options, one element per unique job.
SELECT ord, key, holder, duplicate
FROM {schema}.claim_unique_keys($1::text[], $2::text[], $3::jsonb[], $4::timestamptz[], $5::jsonb[])
