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

-- An attempt that heartbeats, reports progress or waits gets a durable leases row,
-- copied from its receipt (shard and lane key included); later heartbeats update it.
-- Returns the attempts that are still open. An attempt missing from the result was
-- closed meanwhile (cancelled, rescued): its worker should stop.
CREATE OR REPLACE FUNCTION {schema}.heartbeat_attempts(
    p_job_ids bigint[], p_run_leases bigint[], p_claim_slots smallint[],
    p_progress jsonb[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, run_lease bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_slot smallint;
BEGIN
    SELECT r.current_slot INTO v_slot FROM {schema}.ring_state r WHERE r.ring = 'lease';
    RETURN QUERY
    WITH input AS (
        SELECT t.job_id, t.run_lease, t.claim_slot, t.progress
        FROM unnest(p_job_ids, p_run_leases, p_claim_slots,
                    coalesce(p_progress, array_fill(NULL::jsonb, ARRAY[cardinality(p_job_ids)])))
             AS t(job_id, run_lease, claim_slot, progress)),
    open AS MATERIALIZED (
        SELECT lc.*, i.progress
        FROM input i
        JOIN {schema}.lease_claims lc
          ON lc.claim_slot = i.claim_slot AND lc.job_id = i.job_id AND lc.run_lease = i.run_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.done_entries d
            WHERE d.ready_slot = lc.ready_slot AND d.queue = lc.queue AND d.priority = lc.priority
              AND d.enqueue_shard = lc.enqueue_shard AND d.lane_seq = lc.lane_seq)),
    upd AS (
        UPDATE {schema}.leases l
        SET heartbeat_at = now(), progress = coalesce(o.progress, l.progress)
        FROM open o
        WHERE l.queue = o.queue AND l.priority = o.priority AND l.enqueue_shard = o.enqueue_shard
          AND l.lane_seq = o.lane_seq AND l.job_id = o.job_id AND l.run_lease = o.run_lease
        RETURNING l.job_id, l.run_lease),
    ins AS (
        INSERT INTO {schema}.leases
            (lease_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, ready_slot,
             claim_slot, attempt, state, heartbeat_at, deadline_at, progress)
        SELECT v_slot, o.queue, o.priority, o.enqueue_shard, o.lane_seq, o.job_id, o.run_lease,
               o.ready_slot, o.claim_slot, o.attempt, 'running', now(), o.deadline_at, o.progress
        FROM open o
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.leases l
                          WHERE l.queue = o.queue AND l.priority = o.priority
                            AND l.enqueue_shard = o.enqueue_shard AND l.lane_seq = o.lane_seq)
        ON CONFLICT DO NOTHING
        RETURNING job_id, run_lease)
    SELECT u.job_id, u.run_lease FROM upd u
    UNION ALL
    SELECT n.job_id, n.run_lease FROM ins n;
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
CREATE OR REPLACE FUNCTION {schema}.rescue_stale_attempts(p_stale interval, p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, state text, why text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH candidates AS MATERIALIZED (
        SELECT lc.*, l.heartbeat_at, l.state AS lease_state, l.callback_timeout_at,
               CASE
                   WHEN lc.deadline_at IS NOT NULL AND lc.deadline_at < now() THEN 'deadline exceeded'
                   WHEN l.state = 'waiting_external' AND l.callback_timeout_at < now() THEN 'callback timed out'
                   WHEN l.state = 'waiting_external' THEN NULL
                   WHEN coalesce(l.heartbeat_at, lc.claimed_at) < now() - p_stale THEN 'heartbeat stale'
               END AS why
        FROM {schema}.lease_claims lc
        LEFT JOIN {schema}.leases l
          ON l.queue = lc.queue AND l.priority = lc.priority AND l.enqueue_shard = lc.enqueue_shard
         AND l.lane_seq = lc.lane_seq AND l.job_id = lc.job_id AND l.run_lease = lc.run_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.done_entries d
            WHERE d.ready_slot = lc.ready_slot AND d.queue = lc.queue AND d.priority = lc.priority
              AND d.enqueue_shard = lc.enqueue_shard AND d.lane_seq = lc.lane_seq)
          AND (lc.claimed_at < now() - p_stale OR lc.deadline_at < now()
               OR l.callback_timeout_at < now())),
    stale AS MATERIALIZED (
        SELECT c.*, r.max_attempts, coalesce(q.dlq_enabled, false) AS dlq_enabled
        FROM candidates c
        JOIN {schema}.ready_entries r
          ON r.ready_slot = c.ready_slot AND r.queue = c.queue AND r.priority = c.priority
         AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq
        LEFT JOIN {schema}.queue_meta q ON q.queue = c.queue
        WHERE c.why IS NOT NULL
        ORDER BY c.claimed_at
        LIMIT p_limit),
    closed AS (
        INSERT INTO {schema}.done_entries
            (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
        SELECT s.ready_slot, s.queue, s.priority, s.enqueue_shard, s.lane_seq, s.job_id, s.run_lease,
               s.attempt,
               CASE WHEN s.attempt < s.max_attempts THEN 'rescued'
                    WHEN s.dlq_enabled THEN 'dlq' ELSE 'failed' END,
               'rescued: ' || s.why
        FROM stale s
        ON CONFLICT DO NOTHING
        RETURNING ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, state, attempt, error),
    followup AS MATERIALIZED (
        SELECT c.state, c.error, c.attempt AS closed_attempt, r.*
        FROM closed c
        JOIN {schema}.ready_entries r
          ON r.ready_slot = c.ready_slot AND r.queue = c.queue AND r.priority = c.priority
         AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
             created_at, ordering_key, metadata, tags, errors, reason)
        SELECT f.job_id, f.queue, f.priority, f.kind, f.args, f.closed_attempt, f.run_lease + 1,
               f.max_attempts, now(), f.created_at, f.ordering_key, f.metadata, f.tags,
               {schema}.append_error(f.errors, f.closed_attempt, f.error),
               'rescue'
        FROM followup f
        WHERE f.state = 'rescued'),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, created_at,
             ordering_key, metadata, tags, errors, reason)
        SELECT f.job_id, f.queue, f.priority, f.kind, f.args, f.closed_attempt, f.run_lease + 1,
               f.max_attempts, f.created_at, f.ordering_key, f.metadata, f.tags,
               {schema}.append_error(f.errors, f.closed_attempt, f.error),
               f.error
        FROM followup f
        WHERE f.state = 'dlq'),
    gone AS (
        DELETE FROM {schema}.leases l
        USING closed c
        WHERE l.queue = c.queue AND l.priority = c.priority AND l.enqueue_shard = c.enqueue_shard
          AND l.lane_seq = c.lane_seq)
    SELECT c.job_id, c.state, c.error FROM closed c;
END
$$;

-- Cancels a job wherever it is. Returns what was found:
--   'scheduled'  deferred (not yet runnable): removed, cancelled done row on lane_seq = -job_id
--   'available'  ready, not claimed: tombstoned so no claim hands it out, cancelled done row
--   'running'    claimed, attempt open: the attempt is closed as cancelled (its completion
--                becomes stale) and 'awa:cancel' is notified with the job id so the
--                worker can stop the handler
--   'finished'   already terminal or closed;  'missing' no such job.
-- The ready-row lookup by job id scans ready_entries (there is no job_id index on the
-- hot table); it is an operator path, not a hot one.
CREATE OR REPLACE FUNCTION {schema}.cancel_job(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_def   {schema}.deferred_jobs%ROWTYPE;
    v_ready record;
    v_rc    record;
    v_claim bigint;
    v_n     integer;
BEGIN
    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_def;
    IF FOUND THEN
        INSERT INTO {schema}.done_entries
            (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
        VALUES ((SELECT current_slot FROM {schema}.ring_state WHERE ring = 'queue'),
                v_def.queue, v_def.priority, 0, -v_def.job_id, v_def.job_id, v_def.run_lease,
                v_def.attempt, 'cancelled', 'cancelled while scheduled');
        RETURN 'scheduled';
    END IF;

    -- The newest ready row of the job (a retried job has several, older ones closed).
    SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq, r.run_lease, r.attempt
    INTO v_ready
    FROM {schema}.ready_entries r
    WHERE r.job_id = p_job_id
    ORDER BY r.run_lease DESC
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN 'missing';
    END IF;

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
        INSERT INTO {schema}.done_entries
            (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
        VALUES (v_ready.ready_slot, v_ready.queue, v_ready.priority, v_ready.enqueue_shard,
                v_ready.lane_seq, p_job_id, v_ready.run_lease, v_ready.attempt, 'cancelled',
                'cancelled before it ran')
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        RETURN CASE WHEN v_n = 1 THEN 'available' ELSE 'finished' END;
    END IF;

    -- Claimed: close the open attempt from its receipt, which carries the shard, so the
    -- synthesised done row lands on the right shard.
    SELECT lc.* INTO v_rc
    FROM {schema}.lease_claims lc
    WHERE lc.job_id = p_job_id AND lc.run_lease = v_ready.run_lease + 1
      AND lc.queue = v_ready.queue AND lc.priority = v_ready.priority
      AND lc.enqueue_shard = v_ready.enqueue_shard AND lc.lane_seq = v_ready.lane_seq;
    IF NOT FOUND THEN
        RETURN 'finished';
    END IF;
    INSERT INTO {schema}.done_entries
        (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
    VALUES (v_rc.ready_slot, v_rc.queue, v_rc.priority, v_rc.enqueue_shard, v_rc.lane_seq,
            p_job_id, v_rc.run_lease, v_rc.attempt, 'cancelled', 'cancelled while running')
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 THEN
        RETURN 'finished';
    END IF;
    DELETE FROM {schema}.leases l
    WHERE l.queue = v_rc.queue AND l.priority = v_rc.priority
      AND l.enqueue_shard = v_rc.enqueue_shard AND l.lane_seq = v_rc.lane_seq;
    PERFORM pg_notify('awa:cancel', p_job_id::text);
    RETURN 'running';
END
$$;

-- DLQ retention: deletes dead letters older than p_keep; returns how many.
CREATE OR REPLACE FUNCTION {schema}.purge_dlq(p_keep interval)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM {schema}.dlq_entries WHERE dlq_at < now() - p_keep RETURNING 1)
    SELECT count(*)::integer FROM gone
$$;
