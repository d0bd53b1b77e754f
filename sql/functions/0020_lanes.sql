-- Lanes: creation and range reservation (docs/design/engine.md, "Sharded enqueue heads";
-- docs/design/storage.md, "Lanes").

-- Creates the lane (queue, priority, shard) once: its sequence and both head rows.
-- Creators of the same lane serialise on an advisory lock, then re-check, so concurrent
-- first enqueues create it exactly once. Rolls back with the caller's transaction, which
-- is why callers that cache "lane exists" must tolerate the lane vanishing (see
-- reserve_lane_range, which repairs it).
CREATE OR REPLACE FUNCTION {schema}.ensure_lane(p_queue text, p_priority integer, p_shard integer)
RETURNS TABLE (lane_id integer, seq regclass, created boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id  integer;
    v_seq regclass;
    v_qid integer := {schema}.queue_id_of(p_queue);
BEGIN
    SELECT h.lane_id, h.seq INTO v_id, v_seq
    FROM {schema}.queue_enqueue_heads h
    WHERE h.queue_id = v_qid AND h.priority = p_priority AND h.enqueue_shard = p_shard;
    IF FOUND THEN
        RETURN QUERY SELECT v_id, v_seq, false;
        RETURN;
    END IF;

    IF p_shard < 0 OR p_shard > 63 THEN
        RAISE EXCEPTION 'enqueue_shard % is outside 0..63', p_shard USING ERRCODE = '22023';
    END IF;
    -- The queue's id first, holding no lane-creation lock: it may wait for a transaction
    -- that gave the queue its id and has not committed, and that transaction may be about
    -- to create this very lane.
    v_qid := {schema}.ensure_queue_id(p_queue);
    -- Lane creation lock: its own key space (classid = hash of "<schema>:lanes"), apart
    -- from the lane locks (classid = hash of the schema name).
    PERFORM pg_advisory_xact_lock(hashtext('{schema}:lanes'), hashtext(p_queue || ':' || p_priority || ':' || p_shard));
    SELECT h.lane_id, h.seq INTO v_id, v_seq
    FROM {schema}.queue_enqueue_heads h
    WHERE h.queue_id = v_qid AND h.priority = p_priority AND h.enqueue_shard = p_shard;
    IF FOUND THEN
        RETURN QUERY SELECT v_id, v_seq, false;
        RETURN;
    END IF;

    v_id := nextval('{schema}.lane_ids');
    EXECUTE format('CREATE SEQUENCE %s.%I AS bigint MINVALUE 1 START 1', '{schema}', 'lane_seq_' || v_id);
    v_seq := format('%s.%I', '{schema}', 'lane_seq_' || v_id)::regclass;
    INSERT INTO {schema}.queue_enqueue_heads (queue_id, priority, enqueue_shard, lane_id, seq)
    VALUES (v_qid, p_priority, p_shard, v_id, v_seq);
    INSERT INTO {schema}.queue_claim_heads (queue_id, priority, enqueue_shard)
    VALUES (v_qid, p_priority, p_shard)
    ON CONFLICT DO NOTHING;
    RETURN QUERY SELECT v_id, v_seq, true;
END
$$;

-- Reserves p_count contiguous lane_seq values on the lane and returns the first.
--
-- The lane's transaction-scoped advisory lock is taken first and held until the caller's
-- transaction ends. That is the visibility argument (docs/design/engine.md): within a
-- lane, a later producer cannot even reserve N+1 until the producer of N has committed or rolled back,
-- so a claimer that sees row N+k knows every row below it is final (committed, or a
-- permanent rollback gap). Lanes must be reserved in ascending (queue, priority,
-- enqueue_shard) order within a transaction; that global order is what keeps two
-- producers from deadlocking on each other's lanes.
--
-- If the lane is missing (a cached lane whose creation was rolled back) it is created
-- here, so the caller's transaction never fails for a stale cache; `repaired` says so.
--
-- queue_id is the queue's key in the rows (migration 0018). ready_slot is the queue-ring
-- slot the caller must write the rows to, read after the lane lock and held
-- (ready_slot_for_write): a producer that waited for the lane while the ring rotated and
-- pruned must not write into the truncated slot it saw before waiting.
DROP FUNCTION IF EXISTS {schema}.reserve_lane_range(text, integer, integer, integer);
CREATE OR REPLACE FUNCTION {schema}.reserve_lane_range(
    p_queue text, p_priority integer, p_shard integer, p_count integer,
    OUT first_seq bigint, OUT repaired boolean, OUT ready_slot smallint, OUT queue_id integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id  integer;
    v_seq regclass;
BEGIN
    IF p_count IS NULL OR p_count < 1 THEN
        RAISE EXCEPTION 'reservation size must be >= 1' USING ERRCODE = '22023';
    END IF;
    repaired := false;
    queue_id := {schema}.queue_id_of(p_queue);
    SELECT h.lane_id, h.seq INTO v_id, v_seq
    FROM {schema}.queue_enqueue_heads h
    WHERE h.queue_id = reserve_lane_range.queue_id AND h.priority = p_priority AND h.enqueue_shard = p_shard;
    IF NOT FOUND THEN
        SELECT e.lane_id, e.seq, e.created INTO v_id, v_seq, repaired
        FROM {schema}.ensure_lane(p_queue, p_priority, p_shard) e;
        queue_id := {schema}.queue_id_of(p_queue);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('{schema}'), v_id);
    first_seq := nextval(v_seq);
    IF p_count > 1 THEN
        PERFORM setval(v_seq, first_seq + p_count - 1);
    END IF;
    ready_slot := {schema}.ready_slot_for_write();
END
$$;

-- The queue ring's current slot, for rows this transaction is about to write, and held:
-- ROW EXCLUSIVE on its ready partition until the transaction ends, which prune's NOWAIT
-- ACCESS EXCLUSIVE cannot get past. Read in this function's own statement snapshot (it is
-- volatile), so a caller whose statement started before a long wait still gets the slot
-- of now; if a prune took the slot between the read and the lock, the lock waited for it
-- and the slot is no longer live: read again. A slot that is (again) the current one
-- after the lock is live, which spares the common case ring_live_slots' four lookups.
CREATE OR REPLACE FUNCTION {schema}.ready_slot_for_write()
RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_slot smallint;
BEGIN
    LOOP
        v_slot := {schema}.ring_current_slot('queue');
        EXECUTE format('LOCK TABLE %s.%I IN ROW EXCLUSIVE MODE', '{schema}', 'ready_entries_' || v_slot);
        IF {schema}.ring_current_slot('queue') = v_slot
           OR v_slot = ANY ({schema}.ring_live_slots('queue')) THEN
            RETURN v_slot;
        END IF;
    END LOOP;
END
$$;
