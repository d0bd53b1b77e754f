-- Placement of the jobs a transaction enqueued inside itself (the staging table:
-- sql/migrations/0013_enqueue_staging.sql), at that transaction's commit.
--
-- Deadlock freedom. Every lane lock is taken in one of two places, and each takes its
-- lanes in ascending (queue COLLATE "C", priority, enqueue_shard) order and then waits
-- for no other lock until its transaction ends:
--   - a self-committing enqueue (one C++ call outside a caller's transaction, or
--     maintenance's promotion): its own short transaction;
--   - this trigger, at the commit of a transaction that made any number of enqueue
--     calls (C++, insert_job_compat, insert_jobs_compat, in any order and mix, keyed or
--     not): all of the transaction's lanes at once.
-- A waits-for cycle needs a transaction that holds a lane and waits for a lower one,
-- which neither does, so no mix of such transactions can deadlock on lane locks.
-- The trigger is deferred: a caller who runs SET CONSTRAINTS ALL IMMEDIATE (or
-- place_staged_jobs's own name) makes it fire at the end of each enqueue statement
-- instead, with the old per-call lane order and its 40P01 risk. A deferred trigger of
-- the caller's own that fires after this one and waits on a row lock could still close
-- a cycle through the lanes held here; such triggers are rare on a job producer's path.
--
-- Ordering. Within a lane the transaction's rows keep their enqueue order (job ids are
-- taken in call and input order). Between transactions, a lane's order is the order in
-- which they commit: the lane lock is held from the reservation here to the end of the
-- commit, as for a self-committing enqueue (the visibility argument of
-- docs/design/engine.md).
-- Routing is decided here, with the shard count of commit time (for keyed rows read under
-- the queue's reshard lock, so a concurrent change of the count is fenced: see
-- 0022_shard_fences.sql): ordering-keyed rows by
-- shard_for_ordering_key, the others by one compat_rotor pick per (queue, priority) for
-- the whole transaction, so a transaction's unkeyed rows of one lane share one range.
--
-- SECURITY DEFINER (sql/security/function_settings.sql): the producer role holds INSERT
-- on enqueue_staging only; it can neither read other transactions' pending jobs nor
-- write ready_entries' partitions directly through this function.
CREATE OR REPLACE FUNCTION {schema}.place_staged_jobs()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_xact   xid8 := pg_current_xact_id();
    v_qp     record;
    v_lane   record;
    v_shards integer;
    v_pick   integer;
    v_ids    bigint[];
    v_lanes  integer[];
    v_seq    bigint;
    v_slot   smallint;
    v_qid    integer;
BEGIN
    -- Keyed rows: the queues' reshard locks first, before any lane lock; the shard counts
    -- read below then come after any change that committed meanwhile
    -- (0022_shard_fences.sql).
    PERFORM {schema}.hold_shard_counts(ARRAY(SELECT DISTINCT s.queue
                                             FROM {schema}.enqueue_staging s
                                             WHERE s.xact = v_xact AND s.ordering_key IS NOT NULL));
    FOR v_qp IN
        SELECT s.queue, s.priority, bool_or(s.ordering_key IS NULL) AS unkeyed
        FROM {schema}.enqueue_staging s
        WHERE s.xact = v_xact
        GROUP BY s.queue, s.priority
        ORDER BY s.queue COLLATE "C", s.priority
    LOOP
        v_shards := {schema}.queue_shard_count(v_qp.queue);
        v_pick := 0;
        IF v_shards > 1 AND v_qp.unkeyed THEN
            v_pick := (nextval('{schema}.compat_rotor') % v_shards)::integer;
        END IF;
        SELECT array_agg(r.job_id ORDER BY r.job_id), array_agg(r.shard ORDER BY r.job_id)
        INTO v_ids, v_lanes
        FROM (SELECT s.job_id,
                     CASE WHEN v_shards = 1 THEN 0
                          WHEN s.ordering_key IS NOT NULL
                              THEN {schema}.shard_for_ordering_key(s.ordering_key, v_shards)
                          ELSE v_pick END AS shard
              FROM {schema}.enqueue_staging s
              WHERE s.xact = v_xact AND s.queue = v_qp.queue AND s.priority = v_qp.priority) r;

        FOR v_lane IN
            SELECT u.shard, count(*)::integer AS n
            FROM unnest(v_lanes) AS u(shard)
            GROUP BY u.shard
            ORDER BY u.shard
        LOOP
            SELECT r.first_seq, r.ready_slot, r.queue_id INTO v_seq, v_slot, v_qid
            FROM {schema}.reserve_lane_range(v_qp.queue, v_qp.priority, v_lane.shard, v_lane.n) r;
            INSERT INTO {schema}.ready_entries
                (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
                 max_attempts, run_at, created_at, ordering_key, metadata, tags)
            SELECT v_slot, v_qid, s.priority, v_lane.shard,
                   v_seq + row_number() OVER (ORDER BY s.job_id) - 1,
                   s.job_id, s.kind, s.args, s.max_attempts, s.run_at, s.created_at,
                   s.ordering_key, s.metadata, s.tags
            FROM {schema}.enqueue_staging s
            JOIN unnest(v_ids, v_lanes) AS u(job_id, shard) ON u.job_id = s.job_id
            WHERE s.xact = v_xact AND s.queue = v_qp.queue AND s.priority = v_qp.priority
              AND u.shard = v_lane.shard;
        END LOOP;
        PERFORM pg_notify({schema}.notify_channel(v_qp.queue), '');
    END LOOP;
    DELETE FROM {schema}.enqueue_staging s WHERE s.xact = v_xact;
    RETURN NULL;
END
$$;

-- Re-created with the file. ENABLE ALWAYS: a session in replica mode
-- (session_replication_role, e.g. a logical-replication apply or a restore) would
-- otherwise skip it and leave the jobs in staging, never placed.
DROP TRIGGER IF EXISTS place_staged_jobs ON {schema}.enqueue_staging;
CREATE CONSTRAINT TRIGGER place_staged_jobs
    AFTER INSERT ON {schema}.enqueue_staging
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.fires)
    EXECUTE FUNCTION {schema}.place_staged_jobs();
ALTER TABLE {schema}.enqueue_staging ENABLE ALWAYS TRIGGER place_staged_jobs;
