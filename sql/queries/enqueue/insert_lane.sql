-- One lane's share of an enqueue batch: reserve a contiguous lane_seq range (taking the
-- lane lock until the transaction ends) and insert the rows in one statement.
-- $1 queue, $2 priority, $3 enqueue_shard, $4 row count, $5.. per-row arrays.
-- lane_seq = first + ordinality - 1, so callers map ids back to input order by lane_seq.
WITH r AS MATERIALIZED (
    SELECT rr.first_seq, rr.repaired, rr.ready_slot AS slot
    FROM {schema}.reserve_lane_range($1, $2, $3, $4) rr),
ins AS (
    INSERT INTO {schema}.ready_entries
        (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, kind, args,
         max_attempts, run_at, created_at, ordering_key, metadata, tags)
    SELECT r.slot, $1, $2, $3, r.first_seq + t.ord - 1, nextval('{schema}.job_ids'),
           t.kind, t.args, t.max_attempts, coalesce(t.run_at, now()), now(),
           t.ordering_key, t.metadata, t.tags::text[]
    FROM r, unnest($5::text[], $6::jsonb[], $7::smallint[], $8::timestamptz[], $9::bytea[],
                   $10::jsonb[], $11::text[])
            WITH ORDINALITY AS t(kind, args, max_attempts, run_at, ordering_key, metadata, tags, ord)
    RETURNING lane_seq, job_id)
SELECT ins.lane_seq, ins.job_id, r.repaired, r.first_seq
FROM ins, r
