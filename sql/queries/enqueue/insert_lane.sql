-- One lane's share of an enqueue batch: reserve a contiguous lane_seq range (taking the
-- lane lock until the transaction ends) and insert the rows in one statement.
-- $1 queue, $2 priority, $3 enqueue_shard, $4.. per-row arrays.
-- lane_seq = first + ordinality - 1, so callers map ids back to input order by lane_seq;
-- queue_id is the queue's id, which the caller caches for the one-job path.
--
-- The rows are parsed (arrays, JSON, casts) and given their job ids in `t` before the
-- reservation takes the lane lock: r's row count reads t, so t is materialised first. The
-- lock, held until commit, then covers only the writes and the commit.
WITH t AS MATERIALIZED (
    SELECT u.ord, u.kind, u.args, u.max_attempts, coalesce(u.run_at, now()) AS run_at,
           u.ordering_key, u.metadata, u.tags::text[] AS tags,
           nextval('{schema}.job_ids') AS job_id
    FROM unnest($4::text[], $5::jsonb[], $6::smallint[], $7::timestamptz[], $8::bytea[],
                $9::jsonb[], $10::text[])
            WITH ORDINALITY AS u(kind, args, max_attempts, run_at, ordering_key, metadata, tags, ord)),
r AS MATERIALIZED (
    SELECT rr.first_seq, rr.repaired, rr.ready_slot AS slot, rr.queue_id
    FROM {schema}.reserve_lane_range($1, $2, $3, (SELECT count(*)::integer FROM t)) rr),
ins AS (
    INSERT INTO {schema}.ready_entries
        (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
         max_attempts, run_at, created_at, ordering_key, metadata, tags)
    SELECT r.slot, r.queue_id, $2, $3, r.first_seq + t.ord - 1, t.job_id, t.kind, t.args,
           t.max_attempts, t.run_at, now(), t.ordering_key, t.metadata, t.tags
    FROM r, t
    RETURNING lane_seq, job_id)
SELECT ins.lane_seq, ins.job_id, r.repaired, r.first_seq, r.queue_id
FROM ins, r
