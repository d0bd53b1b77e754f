-- Scheduled jobs (run_at in the future): no lane until promotion. Returns the ids in
-- input order.
WITH rows AS MATERIALIZED (
    SELECT t.*, nextval('{schema}.job_ids') AS job_id
    FROM unnest($1::text[], $2::smallint[], $3::text[], $4::jsonb[], $5::smallint[],
                $6::timestamptz[], $7::bytea[], $8::jsonb[], $9::text[])
            WITH ORDINALITY AS t(queue, priority, kind, args, max_attempts, run_at, ordering_key,
                                 metadata, tags, ord)),
ins AS (
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
         ordering_key, metadata, tags, reason)
    SELECT job_id, queue, priority, kind, args, max_attempts, run_at, now(),
           ordering_key, metadata, tags::text[], 'scheduled'
    FROM rows)
SELECT job_id FROM rows ORDER BY ord
