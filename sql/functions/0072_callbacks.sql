-- External callbacks (issue 14; docs/scheduling.md "External callbacks"). A handler
-- registers a callback id for its attempt and returns "wait for callback": the attempt
-- stays open in state waiting_external, its worker slot is freed, and the other system
-- later ends it by the id. Every end goes through close_attempts, so a callback that
-- races the handler, a timeout rescue, a cancel or another callback finalises the
-- attempt exactly once; the losers are stale and change nothing.

-- Whether the attempt (batch, lane_seq) is open. REQUIRES: the caller holds its attempt
-- lock (shared or exclusive) and calls this in a statement started after taking it, so
-- the snapshot shows every closure committed before.
CREATE OR REPLACE FUNCTION {schema}.attempt_is_open(p_batch bigint, p_lane_seq bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM {schema}.claim_batches b
        WHERE b.batch_id = p_batch AND p_lane_seq BETWEEN b.first_seq AND b.last_seq
          AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                          WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                            AND c.lane_seqs @> p_lane_seq))
$$;

-- Gives an open attempt a callback id (kept if it has one) and, when p_timeout is set, a
-- callback timeout of now() + p_timeout; with p_wait the attempt goes to
-- waiting_external, where heartbeat rescue no longer applies (the callback timeout and
-- the hard deadline do). Materialises the attempt's lease row as a heartbeat would.
-- Returns the callback id, or NULL when the attempt is closed (the callback came first,
-- or it was cancelled or rescued).
CREATE OR REPLACE FUNCTION {schema}.register_callback(
    p_batch bigint, p_lane_seq bigint, p_job_id bigint, p_run_lease bigint,
    p_ready_slot smallint, p_attempt smallint, p_timeout interval, p_wait boolean)
RETURNS uuid
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_id    uuid;
    v_batch record;
BEGIN
    IF p_timeout IS NOT NULL AND p_timeout <= interval '0' THEN
        RAISE EXCEPTION 'register_callback: the timeout must be positive' USING ERRCODE = '22023';
    END IF;
    -- Shared, like a heartbeat: closers take it exclusive.
    PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}:attempts'), {schema}.attempt_lock_key(p_batch));
    IF NOT {schema}.attempt_is_open(p_batch, p_lane_seq) THEN
        RETURN NULL;
    END IF;
    -- A heartbeat of the same attempt may insert its lease row concurrently (both hold
    -- the lock shared): whoever loses the insert updates the winner's row.
    FOR i IN 1..2 LOOP
        UPDATE {schema}.leases l
        SET callback_id = coalesce(l.callback_id, gen_random_uuid()),
            callback_timeout_at = CASE WHEN p_timeout IS NULL THEN l.callback_timeout_at
                                       ELSE now() + p_timeout END,
            state = CASE WHEN p_wait THEN 'waiting_external' ELSE l.state END,
            heartbeat_at = now()
        WHERE l.claim_batch = p_batch AND l.lane_seq = p_lane_seq
        RETURNING l.callback_id INTO v_id;
        IF FOUND THEN
            RETURN v_id;
        END IF;
        IF p_timeout IS NULL THEN
            RAISE EXCEPTION 'register_callback: an attempt without a callback needs a timeout'
                USING ERRCODE = '22023';
        END IF;
        SELECT b.queue_id, b.priority, b.enqueue_shard, b.deadline_at INTO v_batch
        FROM {schema}.claim_batches b WHERE b.batch_id = p_batch;
        INSERT INTO {schema}.leases
            (lease_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, ready_slot,
             claim_batch, attempt, state, heartbeat_at, deadline_at, callback_id, callback_timeout_at)
        VALUES ({schema}.ring_current_slot('lease'), v_batch.queue_id, v_batch.priority,
                v_batch.enqueue_shard, p_lane_seq, p_job_id, p_run_lease, p_ready_slot, p_batch,
                p_attempt, CASE WHEN p_wait THEN 'waiting_external' ELSE 'running' END, now(),
                v_batch.deadline_at, gen_random_uuid(), now() + p_timeout)
        ON CONFLICT DO NOTHING
        RETURNING callback_id INTO v_id;
        IF FOUND THEN
            RETURN v_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'register_callback: the lease row of job % kept changing', p_job_id
        USING ERRCODE = '40001';
END
$$;

-- Ends the attempt waiting on p_callback_id: p_outcome 'completed', 'retry' (a retryable
-- failure: retried while attempts remain) or 'fail' (failed, or the DLQ). p_result, with
-- 'completed' only, is the other system's answer, kept on the job's done row. Returns the
-- job and its end state, or no row when no open attempt has that id (it ended already —
-- a duplicate or late callback, a timeout, a cancel — or the id never existed).
DROP FUNCTION IF EXISTS {schema}.resolve_callback(uuid, text, text);
CREATE OR REPLACE FUNCTION {schema}.resolve_callback(p_callback_id uuid, p_outcome text,
                                                     p_error text DEFAULT NULL,
                                                     p_result jsonb DEFAULT NULL)
RETURNS TABLE (job_id bigint, state text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_lease record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('completed', 'retry', 'fail') THEN
        RAISE EXCEPTION 'resolve_callback: unknown outcome (expected completed, retry or fail)'
            USING ERRCODE = '22023';
    END IF;
    IF p_result IS NOT NULL AND p_outcome <> 'completed' THEN
        RAISE EXCEPTION 'resolve_callback: only a completion carries a result' USING ERRCODE = '22023';
    END IF;
    SELECT l.claim_batch, l.lane_seq, l.job_id INTO v_lease
    FROM {schema}.leases l WHERE l.callback_id = p_callback_id LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- close_attempts locks the attempt and re-checks that it is open: a racing end wins
    -- or loses there, never both.
    RETURN QUERY
    SELECT v_lease.job_id, c.state
    FROM {schema}.close_attempts(ARRAY[v_lease.claim_batch], ARRAY[v_lease.lane_seq],
                                 ARRAY[p_outcome], ARRAY[p_error], NULL,
                                 CASE WHEN p_result IS NOT NULL THEN ARRAY[p_result] END) c;
END
$$;

-- The other system is still working: moves the callback timeout to now() + p_timeout
-- (unchanged when NULL). Returns the job id, or NULL when no open attempt has the id.
CREATE OR REPLACE FUNCTION {schema}.heartbeat_callback(p_callback_id uuid, p_timeout interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_lease record;
BEGIN
    IF p_timeout IS NOT NULL AND p_timeout <= interval '0' THEN
        RAISE EXCEPTION 'heartbeat_callback: the timeout must be positive' USING ERRCODE = '22023';
    END IF;
    SELECT l.claim_batch, l.lane_seq, l.job_id INTO v_lease
    FROM {schema}.leases l WHERE l.callback_id = p_callback_id LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}:attempts'),
                                         {schema}.attempt_lock_key(v_lease.claim_batch));
    IF NOT {schema}.attempt_is_open(v_lease.claim_batch, v_lease.lane_seq) THEN
        RETURN NULL;
    END IF;
    UPDATE {schema}.leases l
    SET heartbeat_at = now(),
        callback_timeout_at = CASE WHEN p_timeout IS NULL THEN l.callback_timeout_at
                                   ELSE now() + p_timeout END
    WHERE l.claim_batch = v_lease.claim_batch AND l.lane_seq = v_lease.lane_seq
      AND l.callback_id = p_callback_id;
    RETURN CASE WHEN FOUND THEN v_lease.job_id END;
END
$$;
