-- Open attempts: heartbeats (lease materialisation), rescue and cancel (DESIGN.md §6–8).
-- All of them close attempts through the same per-attempt lock as completion: the
-- done_entries row on the ready row's key, inserted with ON CONFLICT DO NOTHING.

-- A job's error history with one more entry {attempt, error, at}; kept on the job through
-- retries, rescues and the DLQ.
CREATE OR REPLACE FUNCTION {schema}.append_error(p_errors jsonb, p_attempt integer, p_error text)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_errors, '[]'::jsonb)
           || jsonb_build_array(jsonb_build_object('attempt', p_attempt, 'error', p_error, 'at', now()))
$$;

-- An attempt that heartbeats, reports progress or waits gets a durable leases row in the
-- current lease slot, keyed like its ready row and naming its claim batch; later
-- heartbeats update it. Returns the attempts that are still open. An attempt missing
-- from the result was closed meanwhile (cancelled, rescued): its worker should stop.
-- The batch locks are taken shared, so a closer (exclusive) waits for a heartbeat in
-- flight and then deletes the lease it wrote: no lease outlives its attempt.
DROP FUNCTION IF EXISTS {schema}.heartbeat_attempts(bigint[], bigint[], smallint[], jsonb[]);
CREATE OR REPLACE FUNCTION {schema}.heartbeat_attempts(
    p_batches bigint[], p_lane_seqs bigint[], p_job_ids bigint[], p_run_leases bigint[],
    p_ready_slots smallint[], p_attempts smallint[], p_progress jsonb[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, run_lease bigint)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_slot smallint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}:attempts'), k.key)
    FROM (SELECT DISTINCT {schema}.attempt_lock_key(b) AS key FROM unnest(p_batches) b ORDER BY 1) k;
    v_slot := {schema}.ring_current_slot('lease');
    RETURN QUERY
    WITH input AS (
        SELECT t.*
        FROM unnest(p_batches, p_lane_seqs, p_job_ids, p_run_leases, p_ready_slots, p_attempts,
                    coalesce(p_progress, array_fill(NULL::jsonb, ARRAY[cardinality(p_batches)])))
             AS t(batch_id, lane_seq, job_id, run_lease, ready_slot, attempt, progress)),
    open AS MATERIALIZED (
        SELECT i.*, b.queue, b.priority, b.enqueue_shard, b.deadline_at
        FROM input i
        JOIN {schema}.claim_batches b ON b.batch_id = i.batch_id
        WHERE i.lane_seq BETWEEN b.first_seq AND b.last_seq
          AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                          WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                            AND c.lane_seqs @> i.lane_seq)),
    upd AS (
        UPDATE {schema}.leases l
        SET heartbeat_at = now(), progress = coalesce(o.progress, l.progress)
        FROM open o
        WHERE l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq
        RETURNING o.job_id, o.run_lease),
    ins AS (
        INSERT INTO {schema}.leases
            (lease_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, ready_slot,
             claim_batch, attempt, state, heartbeat_at, deadline_at, progress)
        SELECT v_slot, o.queue, o.priority, o.enqueue_shard, o.lane_seq, o.job_id, o.run_lease,
               o.ready_slot, o.batch_id, o.attempt, 'running', now(), o.deadline_at, o.progress
        FROM open o
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.leases l
                          WHERE l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq)
        ON CONFLICT DO NOTHING
        RETURNING job_id, run_lease)
    SELECT u.job_id, u.run_lease FROM upd u
    UNION ALL
    SELECT n.job_id, n.run_lease FROM ins n;
END
$$;

-- The open attempts of the batches that are not fully closed, with their ready rows
-- (found in whichever live slot holds them). O(open batches), not O(history): a fully
-- closed batch is recognised from its closure counts without expanding it.
--
-- jit = off here and on every maintenance and admin function below: TRUNCATE resets a
-- partition's statistics, the planner then assumes a few hundred rows in each empty
-- partition, and the estimate crosses jit_above_cost — over a second of JIT compilation
-- for a scan of one batch (RingsTest.OpenAttemptScanIsNotJitCompiled).
CREATE OR REPLACE FUNCTION {schema}.open_attempts(p_only_batches bigint[] DEFAULT NULL)
RETURNS TABLE (batch_id bigint, claim_slot smallint, lane_seq bigint, job_id bigint,
               run_lease bigint, attempt smallint, ready_slot smallint, queue text,
               priority smallint, enqueue_shard smallint, claimed_at timestamptz,
               deadline_at timestamptz)
LANGUAGE plpgsql STABLE
SET jit = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH open_batches AS MATERIALIZED (
        SELECT b.*
        FROM {schema}.claim_batches b
        WHERE (p_only_batches IS NULL OR b.batch_id = ANY (p_only_batches))
          AND b.n_items > coalesce((SELECT sum(c.n_closed)
                                    FROM {schema}.claim_closures c
                                    WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id), 0))
    SELECT b.batch_id, b.claim_slot, r.lane_seq, r.job_id, r.run_lease + 1, (r.attempt + 1)::smallint,
           r.ready_slot, b.queue, b.priority, b.enqueue_shard, b.claimed_at, b.deadline_at
    FROM open_batches b
    CROSS JOIN unnest({schema}.ring_live_slots('queue')) AS s(slot)
    JOIN {schema}.ready_entries r
      ON r.ready_slot = s.slot AND r.queue = b.queue AND r.priority = b.priority
     AND r.enqueue_shard = b.enqueue_shard AND r.lane_seq BETWEEN b.first_seq AND b.last_seq
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.ready_slot = r.ready_slot AND t.queue = r.queue AND t.priority = r.priority
                        AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
      AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                      WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                        AND c.lane_seqs @> r.lane_seq);
END
$$;

-- Closes stale attempts and sends their jobs on (DESIGN.md §8). An attempt is stale when
--   - it never heartbeated and was claimed more than p_stale ago (heartbeat rescue of a
--     receipt-only attempt), or its lease's last heartbeat is older than p_stale;
--   - it is past its hard deadline (deadline rescue);
--   - it waits for a callback past the callback timeout (callback-timeout rescue).
-- A rescued attempt counts against max_attempts: with attempts left the job goes back to
-- deferred_jobs due now (reason 'rescue'; promotion re-routes it), else it fails or goes
-- to the DLQ. Returns (job_id, state, why) for every attempt closed here.
--
-- Cost: the candidate scans are index range scans over old claims, expired deadlines and
-- timed-out callbacks (prune keeps the old ones few), and only batches among them that are
-- not fully closed are expanded.
-- The candidates are then locked like any closer's, and re-judged with a snapshot taken
-- after the locks, so a heartbeat or completion that got there first is respected.
CREATE OR REPLACE FUNCTION {schema}.rescue_stale_attempts(p_stale interval, p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, state text, why text)
LANGUAGE plpgsql
-- Generic plans: the candidate scan plans in about 1 ms over the partitions and runs in
-- a fraction of that; the leader calls this every second with the same arguments.
SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_batches bigint[];
    v_b       bigint[];
    v_seq     bigint[];
    v_job     bigint[];
    v_why     text[];
BEGIN
    -- Three index-backed sources (one OR over them would scan every retained batch).
    SELECT array_agg(x.batch_id) INTO v_batches
    FROM (SELECT b.batch_id
          FROM (SELECT o.claim_slot, o.batch_id, o.n_items, o.claimed_at
                FROM {schema}.claim_batches o WHERE o.claimed_at < now() - p_stale
                UNION
                SELECT d.claim_slot, d.batch_id, d.n_items, d.claimed_at
                FROM {schema}.claim_batches d WHERE d.deadline_at < now()
                UNION
                SELECT w.claim_slot, w.batch_id, w.n_items, w.claimed_at
                FROM {schema}.leases l
                JOIN {schema}.claim_batches w ON w.batch_id = l.claim_batch
                WHERE l.callback_timeout_at < now()) AS b
          WHERE b.n_items > coalesce((SELECT sum(c.n_closed)
                                      FROM {schema}.claim_closures c
                                      WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id), 0)
          ORDER BY b.claimed_at
          LIMIT p_limit) x;
    IF v_batches IS NULL THEN
        RETURN;
    END IF;

    PERFORM pg_advisory_xact_lock(hashtext('{schema}:attempts'), k.key)
    FROM (SELECT DISTINCT {schema}.attempt_lock_key(b) AS key FROM unnest(v_batches) b ORDER BY 1) k;

    SELECT array_agg(s.batch_id), array_agg(s.lane_seq), array_agg(s.job_id), array_agg(s.why)
    INTO v_b, v_seq, v_job, v_why
    FROM (SELECT o.batch_id, o.lane_seq, o.job_id,
                 CASE
                     WHEN o.deadline_at IS NOT NULL AND o.deadline_at < now() THEN 'deadline exceeded'
                     WHEN l.state = 'waiting_external' AND l.callback_timeout_at < now() THEN 'callback timed out'
                     WHEN l.state = 'waiting_external' THEN NULL
                     WHEN coalesce(l.heartbeat_at, o.claimed_at) < now() - p_stale THEN 'heartbeat stale'
                 END AS why
          FROM {schema}.open_attempts(v_batches) o
          LEFT JOIN {schema}.leases l ON l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq
          ORDER BY o.claimed_at, o.lane_seq) s
    WHERE s.why IS NOT NULL;
    IF v_b IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    SELECT v_job[c.ord], c.state, 'rescued: ' || v_why[c.ord]
    FROM {schema}.close_attempts(v_b, v_seq, array_fill('rescue'::text, ARRAY[cardinality(v_b)]),
                                 ARRAY(SELECT 'rescued: ' || w FROM unnest(v_why) w)) c
    ORDER BY c.ord
    LIMIT p_limit;
END
$$;

-- Cancels a job wherever it is. Returns what was found:
--   'scheduled'  deferred (not yet runnable): removed; its body and a cancelled done row
--                kept on lane_seq = -job_id
--   'available'  ready, not claimed: tombstoned so no claim hands it out, cancelled done row
--   'running'    claimed, attempt open: the attempt is closed as cancelled (its completion
--                becomes stale) and 'awa:cancel' is notified with the job id so the
--                worker can stop the handler
--   'finished'   already terminal or closed;  'missing' no such job.
-- Cost: the scheduled, available and running lookups read live work only (deferred by
-- key, each lane's rows at or after its cursor, the open claim batches). Only a job found
-- in none of them is looked up in the retained history, to tell 'finished' from
-- 'missing'.
CREATE OR REPLACE FUNCTION {schema}.cancel_job(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_def   {schema}.deferred_jobs%ROWTYPE;
    v_slot  smallint;
    v_ready record;
    v_open  record;
    v_claim bigint;
    v_state text;
    v_n     integer;
BEGIN
    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_def;
    IF FOUND THEN
        -- The body stays on a ready row at lane_seq = -job_id, beside the done row, so the
        -- job can be shown and retried like any cancelled job (retry_job). No lane
        -- produces that key, and every reader of pending work takes rows at or after a
        -- claim cursor (>= 1), so it is history: never claimed, counted, carried or
        -- found pending by prune. The slot is held for write, as a producer's is.
        v_slot := {schema}.ready_slot_for_write();
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, kind, args, attempt,
             run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags, errors)
        VALUES (v_slot, v_def.queue, v_def.priority, 0, -v_def.job_id, v_def.job_id, v_def.kind,
                v_def.args, v_def.attempt, v_def.run_lease, v_def.max_attempts, v_def.run_at,
                v_def.created_at, v_def.ordering_key, v_def.metadata, v_def.tags, v_def.errors);
        INSERT INTO {schema}.done_entries
            (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
        VALUES (v_slot, v_def.queue, v_def.priority, 0, -v_def.job_id, v_def.job_id, v_def.run_lease,
                v_def.attempt, 'cancelled', 'cancelled while scheduled');
        RETURN 'scheduled';
    END IF;

    -- Not claimed yet: at or after its lane's claim cursor.
    SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq, r.run_lease, r.attempt
    INTO v_ready
    FROM {schema}.queue_claim_heads c
    CROSS JOIN unnest({schema}.ring_live_slots('queue')) AS s(slot)
    JOIN {schema}.ready_entries r
      ON r.ready_slot = s.slot AND r.queue = c.queue AND r.priority = c.priority
     AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
    WHERE r.job_id = p_job_id
      -- a moved job's old row is tombstoned; its live row is elsewhere
      AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.ready_slot = r.ready_slot AND t.queue = r.queue
                        AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq)
    LIMIT 1;
    IF FOUND THEN
        -- Serialise with claimers of this lane: once we hold the head, the row is either
        -- behind the cursor (claimed) or not (and no claim can take it before we commit).
        SELECT c.claim_seq INTO v_claim
        FROM {schema}.queue_claim_heads c
        WHERE c.queue = v_ready.queue AND c.priority = v_ready.priority
          AND c.enqueue_shard = v_ready.enqueue_shard
        FOR UPDATE;
        IF v_ready.lane_seq >= v_claim THEN
            INSERT INTO {schema}.ready_tombstones (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id)
            VALUES (v_ready.ready_slot, v_ready.queue, v_ready.priority, v_ready.enqueue_shard,
                    v_ready.lane_seq, p_job_id)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 0 THEN
                RETURN 'finished';
            END IF;
            INSERT INTO {schema}.done_entries
                (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
            VALUES (v_ready.ready_slot, v_ready.queue, v_ready.priority, v_ready.enqueue_shard,
                    v_ready.lane_seq, p_job_id, v_ready.run_lease, v_ready.attempt, 'cancelled',
                    'cancelled before it ran');
            RETURN 'available';
        END IF;
    END IF;

    -- Claimed: close the open attempt through the common closing path, which lands the
    -- done row on the ready row's own key and shard.
    SELECT o.batch_id, o.lane_seq INTO v_open
    FROM {schema}.open_attempts() o
    WHERE o.job_id = p_job_id
    LIMIT 1;
    IF FOUND THEN
        SELECT c.state INTO v_state
        FROM {schema}.close_attempts(ARRAY[v_open.batch_id], ARRAY[v_open.lane_seq],
                                     ARRAY['cancel'], ARRAY['cancelled while running']) c;
        IF v_state IS NULL THEN
            RETURN 'finished';
        END IF;
        PERFORM pg_notify('awa:cancel', p_job_id::text);
        RETURN 'running';
    END IF;

    IF EXISTS (SELECT 1 FROM {schema}.dlq_entries d WHERE d.job_id = p_job_id)
       OR EXISTS (SELECT 1 FROM {schema}.done_entries d WHERE d.job_id = p_job_id)
       OR EXISTS (SELECT 1 FROM {schema}.ready_entries r WHERE r.job_id = p_job_id) THEN
        RETURN 'finished';
    END IF;
    RETURN 'missing';
END
$$;

-- DLQ retention: deletes dead letters older than p_keep; returns how many.
CREATE OR REPLACE FUNCTION {schema}.purge_dlq(p_keep interval)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM {schema}.dlq_entries WHERE dlq_at < now() - p_keep RETURNING 1)
    SELECT count(*)::integer FROM gone
$$;
