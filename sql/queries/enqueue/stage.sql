-- An enqueue inside the caller's transaction: the rows are staged and placed in their
-- lanes when that transaction commits (place_staged_jobs, sql/functions/0032_enqueue_staging.sql),
-- which reserves every lane of the transaction at once, in the global lock order.
-- $1 queue, $2 priority, $3 kind, $4 args, $5 max_attempts, $6 run_at, $7 ordering_key,
-- $8 metadata, $9 tags (each element an array literal): one element per row.
-- Returns the job ids in input order (taken in it, which is also their order in a lane).
-- Only the call's first row queues a trigger event (`fires`).
WITH t AS MATERIALIZED (
    SELECT u.ord, nextval('{schema}.job_ids') AS job_id, u.queue, u.priority, u.kind, u.args,
           u.max_attempts, coalesce(u.run_at, now()) AS run_at, u.ordering_key, u.metadata,
           u.tags::text[] AS tags
    FROM unnest($1::text[], $2::smallint[], $3::text[], $4::jsonb[], $5::smallint[],
                $6::timestamptz[], $7::bytea[], $8::jsonb[], $9::text[])
            WITH ORDINALITY AS u(queue, priority, kind, args, max_attempts, run_at,
                                 ordering_key, metadata, tags, ord)),
ins AS (
    INSERT INTO {schema}.enqueue_staging
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
         ordering_key, metadata, tags, fires)
    SELECT t.job_id, t.queue, t.priority, t.kind, t.args, t.max_attempts, t.run_at, now(),
           t.ordering_key, t.metadata, t.tags, t.ord = 1
    FROM t)
SELECT t.job_id FROM t ORDER BY t.ord
