-- Operator actions on jobs: retry, move between queues (docs/design/engine.md,
-- "Cross-queue administration"), reprioritise, age waiting rows. Every action records itself in
-- job_events for `awa job show`.
--
-- Concurrency: the same locks as the engine's own paths.
--   - A ready row is immutable. An available job changes lane by a tombstone on its row,
--     written under its lane's claim-head lock (FOR UPDATE) after checking the row is
--     still at or after the cursor — exactly as cancel_job does; then a new ready row for
--     the same job_id at the tail of the destination lane, reserved through
--     reserve_lane_range (the lane's advisory lock, the ready slot held for write).
--     Claimers skip a locked head (SKIP LOCKED), so none waits for us, and none can take
--     the row between our check and our commit.
--   - A job comes back to ready through deferred_jobs + promote_deferred, the routine
--     promotion uses, so it lands on the queue's current shards [0, S).
--   - A retry changes the terminal done row to 'retried' (it no longer counts as failed or
--     cancelled in queue_counts_exact) with a row lock: of two concurrent retries, the
--     second finds nothing to retry.
--   - All these actions take one transaction-scoped advisory lock (classid: hash of
--     "<schema>:job_admin"), so two of them never lock claim heads, done rows and lanes
--     in different orders. Producers, claimers and closers never wait for a claim head
--     while holding a lane lock, so they cannot close a cycle with us.

CREATE OR REPLACE FUNCTION {schema}.lock_job_admin()
RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('{schema}:job_admin'), 0)
$$;

CREATE OR REPLACE FUNCTION {schema}.check_queue_name(p_queue text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_queue IS NULL OR p_queue !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid queue name "%": use 1..200 characters from A-Z a-z 0-9 _ . : -', p_queue
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- Moves available jobs to the tail of another lane: job i to queue p_queues[i] (NULL: its
-- own) at priority p_priorities[i] (NULL: its own). Jobs that are not available (claimed,
-- tombstoned, deferred, finished) and jobs already on that (queue, priority) are left
-- alone. The destination shard: a keyed row keeps its key's route,
-- source_enqueue_shard % destination shard count; an unkeyed row takes the destination's
-- ordinary enqueue rule (one rotor pick per destination (queue, priority)). Never a
-- shard outside the destination's current width. Rows keep job_id, attempt, run_lease,
-- run_at and their body; rows from one source lane keep their order. Returns what moved.
--
-- p_aging (age_waiting_priorities): a row that moved up L levels has its run_at moved
-- L * p_aging later, the wait it spent. Its effective priority at claim time
-- (priority - floor(wait / aging)) is then the same as before the move, so aging again
-- — here or at claim time — never counts the same wait twice.
CREATE OR REPLACE FUNCTION {schema}.relocate_available(
    p_job_ids bigint[], p_queues text[], p_priorities integer[], p_why text DEFAULT NULL,
    p_aging interval DEFAULT NULL)
RETURNS TABLE (job_id bigint, from_queue text, from_priority smallint, from_shard smallint,
               to_queue text, to_priority smallint, to_shard smallint)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_n    integer := coalesce(cardinality(p_job_ids), 0);
    v_lane record;
    v_seq  bigint;
    v_slot smallint;
    v_qid  integer;
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF coalesce(cardinality(p_queues), v_n) <> v_n OR coalesce(cardinality(p_priorities), v_n) <> v_n THEN
        RAISE EXCEPTION 'relocate_available: the input arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_priorities) p WHERE p NOT BETWEEN 1 AND 4) THEN
        RAISE EXCEPTION 'priority is outside 1..4' USING ERRCODE = '22023';
    END IF;
    PERFORM {schema}.check_queue_name(q) FROM unnest(p_queues) q WHERE q IS NOT NULL;
    PERFORM {schema}.lock_job_admin();

    CREATE TEMP TABLE IF NOT EXISTS awa_relocate (
        job_id bigint, ready_slot smallint, queue_id integer, queue text, priority smallint,
        enqueue_shard smallint, lane_seq bigint, ordering_key bytea,
        to_queue text, to_priority smallint, to_shard integer) ON COMMIT DROP;
    TRUNCATE awa_relocate;

    INSERT INTO awa_relocate
    SELECT DISTINCT ON (r.job_id) r.job_id, r.ready_slot, r.queue_id, qi.queue, r.priority,
           r.enqueue_shard, r.lane_seq, r.ordering_key, coalesce(t.to_queue, qi.queue),
           coalesce(t.to_priority, r.priority)::smallint, NULL
    FROM unnest(p_job_ids,
                coalesce(p_queues, array_fill(NULL::text, ARRAY[v_n])),
                coalesce(p_priorities, array_fill(NULL::integer, ARRAY[v_n])))
         AS t(job_id, to_queue, to_priority)
    JOIN {schema}.ready_entries r ON r.job_id = t.job_id
    JOIN {schema}.queue_ids qi ON qi.queue_id = r.queue_id
    JOIN {schema}.queue_claim_heads c
      ON c.queue_id = r.queue_id AND c.priority = r.priority AND c.enqueue_shard = r.enqueue_shard
    WHERE r.lane_seq >= c.claim_seq
      AND (coalesce(t.to_queue, qi.queue), coalesce(t.to_priority, r.priority)) <> (qi.queue, r.priority)
      AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones x
                      WHERE x.ready_slot = r.ready_slot AND x.queue_id = r.queue_id AND x.priority = r.priority
                        AND x.enqueue_shard = r.enqueue_shard AND x.lane_seq = r.lane_seq)
    ORDER BY r.job_id, r.lane_seq;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    -- The source heads, in one global order.
    PERFORM 1
    FROM {schema}.queue_claim_heads c
    WHERE (c.queue_id, c.priority, c.enqueue_shard) IN (SELECT x.queue_id, x.priority, x.enqueue_shard
                                                         FROM awa_relocate x)
    ORDER BY c.queue_id, c.priority, c.enqueue_shard
    FOR UPDATE OF c;

    -- Under the locks, in a new snapshot: a claim that committed before we got a head may
    -- have taken a row, a cancel may have tombstoned one.
    DELETE FROM awa_relocate x
    WHERE x.lane_seq < (SELECT c.claim_seq FROM {schema}.queue_claim_heads c
                        WHERE c.queue_id = x.queue_id AND c.priority = x.priority
                          AND c.enqueue_shard = x.enqueue_shard)
       OR EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                  WHERE t.ready_slot = x.ready_slot AND t.queue_id = x.queue_id AND t.priority = x.priority
                    AND t.enqueue_shard = x.enqueue_shard AND t.lane_seq = x.lane_seq);

    INSERT INTO {schema}.ready_tombstones (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id)
    SELECT x.ready_slot, x.queue_id, x.priority, x.enqueue_shard, x.lane_seq, x.job_id
    FROM awa_relocate x;

    -- Keyed rows: the destinations' reshard locks before their counts are read
    -- (0022_shard_fences.sql).
    PERFORM {schema}.hold_shard_counts(ARRAY(SELECT DISTINCT x.to_queue FROM awa_relocate x
                                             WHERE x.ordering_key IS NOT NULL));
    UPDATE awa_relocate x
    SET to_shard = CASE WHEN s.shards = 1 THEN 0
                        WHEN x.ordering_key IS NOT NULL THEN x.enqueue_shard % s.shards
                        ELSE s.pick END
    FROM (SELECT q.to_queue, q.to_priority, q.shards,
                 (nextval('{schema}.compat_rotor') % q.shards)::integer AS pick
          FROM (SELECT DISTINCT y.to_queue, y.to_priority,
                       {schema}.queue_shard_count(y.to_queue) AS shards
                FROM awa_relocate y) q) s
    WHERE s.to_queue = x.to_queue AND s.to_priority = x.to_priority;

    -- Destination lanes in ascending (queue, priority, enqueue_shard) order, the global
    -- lock order of producers.
    FOR v_lane IN
        SELECT x.to_queue, x.to_priority, x.to_shard, count(*) AS n
        FROM awa_relocate x
        GROUP BY x.to_queue, x.to_priority, x.to_shard
        ORDER BY x.to_queue COLLATE "C", x.to_priority, x.to_shard
    LOOP
        SELECT r.first_seq, r.ready_slot, r.queue_id INTO v_seq, v_slot, v_qid
        FROM {schema}.reserve_lane_range(v_lane.to_queue, v_lane.to_priority, v_lane.to_shard,
                                         v_lane.n::integer) r;
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args, attempt,
             run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags, errors)
        SELECT v_slot, v_qid, x.to_priority, x.to_shard,
               v_seq + row_number() OVER (ORDER BY x.priority, x.queue COLLATE "C",
                                                   x.enqueue_shard, x.lane_seq) - 1,
               r.job_id, r.kind, r.args, r.attempt, r.run_lease, r.max_attempts,
               r.run_at + coalesce(p_aging * greatest(x.priority - x.to_priority, 0), interval '0'),
               r.created_at, r.ordering_key, r.metadata, r.tags, r.errors
        FROM awa_relocate x
        JOIN {schema}.ready_entries r
          ON r.ready_slot = x.ready_slot AND r.queue_id = x.queue_id AND r.priority = x.priority
         AND r.enqueue_shard = x.enqueue_shard AND r.lane_seq = x.lane_seq
        WHERE x.to_queue = v_lane.to_queue AND x.to_priority = v_lane.to_priority
          AND x.to_shard = v_lane.to_shard;
        PERFORM pg_notify({schema}.notify_channel(v_lane.to_queue), '');
    END LOOP;

    INSERT INTO {schema}.job_events (job_id, event, attempt, enqueue_shard, detail)
    SELECT x.job_id, 'moved', r.attempt, x.to_shard,
           format('from queue %s (priority %s, shard %s) to queue %s (priority %s, shard %s)%s',
                  x.queue, x.priority, x.enqueue_shard, x.to_queue, x.to_priority, x.to_shard,
                  coalesce(' (' || p_why || ')', ''))
    FROM awa_relocate x
    JOIN {schema}.ready_entries r
      ON r.ready_slot = x.ready_slot AND r.queue_id = x.queue_id AND r.priority = x.priority
     AND r.enqueue_shard = x.enqueue_shard AND r.lane_seq = x.lane_seq;

    RETURN QUERY
    SELECT x.job_id, x.queue, x.priority, x.enqueue_shard, x.to_queue, x.to_priority,
           x.to_shard::smallint
    FROM awa_relocate x
    ORDER BY x.job_id;
END
$$;

-- How an action on one job ended when it changed nothing: where the job is (job_states),
-- 'not_found' when nowhere.
CREATE OR REPLACE FUNCTION {schema}.job_action_refused(p_job_id bigint, p_outcome text)
RETURNS TABLE (state text, outcome text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_state text;
BEGIN
    SELECT s.state INTO v_state FROM {schema}.job_states(p_job_id) s;
    RETURN QUERY SELECT coalesce(v_state, ''), CASE WHEN v_state IS NULL THEN 'not_found' ELSE p_outcome END;
END
$$;

-- move_queue (the name AWA's ADR-025 gives it): a ready (available) or deferred
-- (scheduled, retryable) job goes to p_destination. A deferred job has no shard: it is
-- updated in place, and promotion routes it. An available job is re-enqueued at the tail of the destination lane of its
-- priority (relocate_available: the key's route, or the destination's ordinary rule).
-- Returns (state before, outcome): 'moved', 'unchanged' (already there), 'not_movable'
-- (waiting, running, waiting_external or finished), 'not_found'.
CREATE OR REPLACE FUNCTION {schema}.move_queue(p_job_id bigint, p_destination text)
RETURNS TABLE (state text, outcome text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_def   record;
    v_now   record;
    v_state text;
    v_moved record;
BEGIN
    PERFORM {schema}.check_queue_name(p_destination);
    PERFORM {schema}.lock_job_admin();

    -- Promotion takes due rows FOR UPDATE SKIP LOCKED, so it skips a row we hold; if it
    -- holds the row first, we find it gone and look in ready below (a new snapshot).
    SELECT d.queue, d.reason, d.attempt INTO v_def
    FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id FOR UPDATE;
    IF FOUND THEN
        v_state := CASE WHEN v_def.reason IN ('scheduled', 'snooze') THEN 'scheduled' ELSE 'retryable' END;
        IF v_def.queue = p_destination THEN
            RETURN QUERY SELECT v_state, 'unchanged'::text;
            RETURN;
        END IF;
        UPDATE {schema}.deferred_jobs d SET queue = p_destination WHERE d.job_id = p_job_id;
        INSERT INTO {schema}.job_events (job_id, event, attempt, detail)
        VALUES (p_job_id, 'moved', v_def.attempt,
                format('from queue %s to queue %s (while %s)', v_def.queue, p_destination, v_state));
        RETURN QUERY SELECT v_state, 'moved'::text;
        RETURN;
    END IF;

    SELECT * INTO v_moved
    FROM {schema}.relocate_available(ARRAY[p_job_id], ARRAY[p_destination], NULL) m;
    IF FOUND THEN
        RETURN QUERY SELECT 'available'::text, 'moved'::text;
        RETURN;
    END IF;
    SELECT s.state, s.queue INTO v_now FROM {schema}.job_states(p_job_id) s;
    IF FOUND AND v_now.state = 'available' AND v_now.queue = p_destination THEN
        RETURN QUERY SELECT 'available'::text, 'unchanged'::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM {schema}.job_action_refused(p_job_id, 'not_movable');
END
$$;

-- A deferred job's priority is updated in place; an available job moves to the tail of
-- the new priority's lane of its queue (relocate_available's shard rule). Returns (state
-- before, outcome): 'reprioritised', 'unchanged', 'not_movable', 'not_found'.
CREATE OR REPLACE FUNCTION {schema}.set_job_priority(p_job_id bigint, p_priority integer)
RETURNS TABLE (state text, outcome text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_def   record;
    v_now   record;
    v_state text;
    v_moved record;
BEGIN
    IF p_priority IS NULL OR p_priority NOT BETWEEN 1 AND 4 THEN
        RAISE EXCEPTION 'priority % is outside 1..4', p_priority USING ERRCODE = '22023';
    END IF;
    PERFORM {schema}.lock_job_admin();

    SELECT d.priority, d.reason, d.attempt INTO v_def
    FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id FOR UPDATE;
    IF FOUND THEN
        v_state := CASE WHEN v_def.reason IN ('scheduled', 'snooze') THEN 'scheduled' ELSE 'retryable' END;
        IF v_def.priority = p_priority THEN
            RETURN QUERY SELECT v_state, 'unchanged'::text;
            RETURN;
        END IF;
        UPDATE {schema}.deferred_jobs d SET priority = p_priority WHERE d.job_id = p_job_id;
        INSERT INTO {schema}.job_events (job_id, event, attempt, detail)
        VALUES (p_job_id, 'moved', v_def.attempt,
                format('from priority %s to priority %s (while %s)', v_def.priority, p_priority, v_state));
        RETURN QUERY SELECT v_state, 'reprioritised'::text;
        RETURN;
    END IF;

    SELECT * INTO v_moved
    FROM {schema}.relocate_available(ARRAY[p_job_id], NULL, ARRAY[p_priority], 'priority set');
    IF FOUND THEN
        RETURN QUERY SELECT 'available'::text, 'reprioritised'::text;
        RETURN;
    END IF;
    SELECT s.state, s.priority INTO v_now FROM {schema}.job_states(p_job_id) s;
    IF FOUND AND v_now.state = 'available' AND v_now.priority = p_priority THEN
        RETURN QUERY SELECT 'available'::text, 'unchanged'::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM {schema}.job_action_refused(p_job_id, 'not_movable');
END
$$;

-- The aging lookup: available jobs of the queue whose wait since run_at makes them
-- at least one level better at one level per p_aging (never above 1) move to the tail of
-- that priority's lane (relocate_available, which moves run_at on by the levels spent, so
-- a second call does not age the same wait again). Aging at claim time
-- (claim_ready_runtime's p_aging) only orders lanes; this rewrites where the rows are.
-- Returns how many moved.
CREATE OR REPLACE FUNCTION {schema}.age_waiting_priorities(p_queue text, p_aging interval)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_ids   bigint[];
    v_prios integer[];
    v_n     integer;
BEGIN
    PERFORM {schema}.check_queue_name(p_queue);
    IF p_aging IS NULL OR p_aging <= interval '0' THEN
        RAISE EXCEPTION 'aging interval must be positive' USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(a.job_id ORDER BY a.priority, a.enqueue_shard, a.lane_seq),
           array_agg(a.aged ORDER BY a.priority, a.enqueue_shard, a.lane_seq)
    INTO v_ids, v_prios
    FROM (SELECT r.job_id, r.priority, r.enqueue_shard, r.lane_seq,
                 greatest(1, r.priority - floor(extract(epoch FROM now() - r.run_at)
                                                / extract(epoch FROM p_aging)))::integer AS aged
          FROM {schema}.available_rows(p_queue) r
          WHERE r.priority > 1) a
    WHERE a.aged < a.priority;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO v_n
    FROM {schema}.relocate_available(v_ids, NULL, v_prios, 'aged', p_aging);
    RETURN v_n;
END
$$;

-- A failed or cancelled job, or a dead letter, gets a new attempt: back in ready at once
-- (through deferred_jobs and promote_deferred, on the queue's current shards), attempt
-- count 0, run_lease carried on (the next claim's lease is higher than every earlier
-- one), errors kept — with the failed attempt's own error, which only its done row held.
-- The done row becomes 'retried'. A job cancelled while scheduled has its body on a row at
-- lane_seq = -job_id (cancel_job); that pair is deleted instead, so a later cancel of the
-- same job can write it again. Returns (state before, outcome): 'retried',
-- 'not_retryable', 'not_found'.
CREATE OR REPLACE FUNCTION {schema}.retry_job(p_job_id bigint)
RETURNS TABLE (state text, outcome text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_done record;
    v_body {schema}.ready_entries%ROWTYPE;
BEGIN
    PERFORM {schema}.lock_job_admin();
    IF cardinality({schema}.retry_dlq_entries(p_job_id, NULL, NULL, NULL, false)) > 0 THEN
        RETURN QUERY SELECT 'dlq'::text, 'retried'::text;
        RETURN;
    END IF;

    SELECT d.ready_slot, d.queue_id, d.priority, d.enqueue_shard, d.lane_seq, d.state, d.attempt,
           d.run_lease, d.finished_at, d.error
    INTO v_done
    FROM {schema}.done_entries d
    WHERE d.job_id = p_job_id AND d.state IN ('failed', 'cancelled')
    ORDER BY d.finished_at DESC
    LIMIT 1
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM {schema}.job_action_refused(p_job_id, 'not_retryable');
        RETURN;
    END IF;
    SELECT r.* INTO v_body
    FROM {schema}.ready_entries r
    WHERE r.ready_slot = v_done.ready_slot AND r.queue_id = v_done.queue_id
      AND r.priority = v_done.priority AND r.enqueue_shard = v_done.enqueue_shard
      AND r.lane_seq = v_done.lane_seq;
    IF NOT FOUND THEN
        -- cancelled while scheduled before cancel_job kept the body
        RETURN QUERY SELECT v_done.state, 'not_retryable'::text;
        RETURN;
    END IF;

    IF v_done.lane_seq < 0 THEN
        DELETE FROM {schema}.done_entries d
        WHERE d.ready_slot = v_done.ready_slot AND d.queue_id = v_done.queue_id
          AND d.priority = v_done.priority AND d.enqueue_shard = v_done.enqueue_shard
          AND d.lane_seq = v_done.lane_seq;
        DELETE FROM {schema}.ready_entries r
        WHERE r.ready_slot = v_done.ready_slot AND r.queue_id = v_done.queue_id
          AND r.priority = v_done.priority AND r.enqueue_shard = v_done.enqueue_shard
          AND r.lane_seq = v_done.lane_seq;
    ELSE
        UPDATE {schema}.done_entries d SET state = 'retried'
        WHERE d.ready_slot = v_done.ready_slot AND d.queue_id = v_done.queue_id
          AND d.priority = v_done.priority AND d.enqueue_shard = v_done.enqueue_shard
          AND d.lane_seq = v_done.lane_seq;
    END IF;

    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
         created_at, ordering_key, metadata, tags, errors, reason)
    VALUES (p_job_id, (SELECT i.queue FROM {schema}.queue_ids i WHERE i.queue_id = v_body.queue_id),
            v_body.priority, v_body.kind, v_body.args, 0,
            greatest(v_body.run_lease, v_done.run_lease), v_body.max_attempts, now(),
            v_body.created_at, v_body.ordering_key, v_body.metadata, v_body.tags,
            CASE WHEN v_done.state = 'failed' AND v_done.error IS NOT NULL
                 THEN coalesce(v_body.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                          'attempt', v_done.attempt, 'error', v_done.error, 'at', v_done.finished_at))
                 ELSE v_body.errors END,
            'scheduled');
    PERFORM {schema}.promote_deferred(1, ARRAY[p_job_id]);
    INSERT INTO {schema}.job_events (job_id, event, attempt, detail)
    VALUES (p_job_id, 'retried_by_operator', v_done.attempt,
            'was ' || v_done.state || CASE WHEN v_done.lane_seq < 0 THEN ' while scheduled' ELSE '' END);
    RETURN QUERY SELECT v_done.state, 'retried'::text;
END
$$;

-- retry_job for every failed job of the queue and / or kind (at least one must be given).
-- Returns the ids retried, ascending.
CREATE OR REPLACE FUNCTION {schema}.retry_failed_jobs(p_queue text, p_kind text)
RETURNS bigint[]
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_ids bigint[];
BEGIN
    IF p_queue IS NULL AND p_kind IS NULL THEN
        RAISE EXCEPTION 'retry of failed jobs needs a queue or a kind' USING ERRCODE = '22023';
    END IF;
    PERFORM {schema}.lock_job_admin();
    WITH picked AS (
        UPDATE {schema}.done_entries d SET state = 'retried'
        FROM {schema}.ready_entries r, {schema}.queue_ids qi
        WHERE d.state = 'failed' AND d.lane_seq > 0
          AND (p_queue IS NULL OR qi.queue = p_queue)
          AND (p_kind IS NULL OR r.kind = p_kind)
          AND qi.queue_id = d.queue_id
          AND r.ready_slot = d.ready_slot AND r.queue_id = d.queue_id AND r.priority = d.priority
          AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
        RETURNING d.job_id, d.attempt AS done_attempt, d.run_lease AS done_lease, d.finished_at,
                  d.error, qi.queue, r.priority, r.kind, r.args, r.run_lease, r.max_attempts,
                  r.created_at, r.ordering_key, r.metadata, r.tags, r.errors),
    requeued AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
             created_at, ordering_key, metadata, tags, errors, reason)
        SELECT p.job_id, p.queue, p.priority, p.kind, p.args, 0, greatest(p.run_lease, p.done_lease),
               p.max_attempts, now(), p.created_at, p.ordering_key, p.metadata, p.tags,
               CASE WHEN p.error IS NOT NULL
                    THEN coalesce(p.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                             'attempt', p.done_attempt, 'error', p.error, 'at', p.finished_at))
                    ELSE p.errors END,
               'scheduled'
        FROM picked p
        RETURNING job_id),
    noted AS (
        INSERT INTO {schema}.job_events (job_id, event, attempt, detail)
        SELECT p.job_id, 'retried_by_operator', p.done_attempt, 'was failed'
        FROM picked p)
    SELECT array_agg(q.job_id ORDER BY q.job_id) INTO v_ids FROM requeued q;
    IF v_ids IS NULL THEN
        RETURN '{}'::bigint[];
    END IF;
    PERFORM {schema}.promote_deferred(cardinality(v_ids), v_ids);
    RETURN v_ids;
END
$$;
