-- Open attempts: heartbeats (lease materialisation), rescue and cancel.
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
        SELECT i.*, b.queue_id, b.priority, b.enqueue_shard, b.deadline_at
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
            (lease_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, ready_slot,
             claim_batch, attempt, state, heartbeat_at, deadline_at, progress)
        SELECT v_slot, o.queue_id, o.priority, o.enqueue_shard, o.lane_seq, o.job_id, o.run_lease,
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
DROP FUNCTION IF EXISTS {schema}.open_attempts(bigint[]);
CREATE OR REPLACE FUNCTION {schema}.open_attempts(p_only_batches bigint[] DEFAULT NULL)
RETURNS TABLE (batch_id bigint, claim_slot smallint, lane_seq bigint, job_id bigint,
               run_lease bigint, attempt smallint, ready_slot smallint, queue_id integer,
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
           r.ready_slot, b.queue_id, b.priority, b.enqueue_shard, b.claimed_at, b.deadline_at
    FROM open_batches b
    CROSS JOIN unnest({schema}.ring_live_slots('queue')) AS s(slot)
    JOIN {schema}.ready_entries r
      ON r.ready_slot = s.slot AND r.queue_id = b.queue_id AND r.priority = b.priority
     AND r.enqueue_shard = b.enqueue_shard AND r.lane_seq BETWEEN b.first_seq AND b.last_seq
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id AND t.priority = r.priority
                        AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
      AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                      WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                        AND c.lane_seqs @> r.lane_seq);
END
$$;

-- Closes stale attempts and sends their jobs on. An attempt is stale when
--   - it is past its hard deadline (deadline rescue);
--   - it is parked (waiting_external) past its callback timeout (callback-timeout
--     rescue); a parked attempt is never heartbeat-stale, however old its heartbeat;
--   - otherwise, when its lease's last heartbeat, or its claim if it never heartbeated
--     (a receipt-only attempt), is older than p_stale (heartbeat rescue).
-- A rescued attempt counts against max_attempts: with attempts left the job goes back to
-- deferred_jobs due now (reason 'rescue'; promotion re-routes it), else it fails or goes
-- to the DLQ. Returns (job_id, state, why) for every attempt closed here: at most p_limit,
-- the oldest claims first.
--
-- Staleness is decided before the limit applies: p_limit bounds the
-- work of one call (the batches expanded and locked, the attempts closed), never which
-- candidates are looked at. So healthy long-lived attempts, however many and however old,
-- never hide stale ones, and successive calls rescue every stale attempt, oldest claim
-- first. Each source yields only batches that hold a stale attempt:
--   - receipt-only: batches claimed before the cutoff (claimed_at index), still open,
--     with more open attempts (n_items less their closures) than attempts with a lease
--     (leases by batch, migration 0015). A lease exists only while its attempt is open
--     (the closer deletes it with the closure, in one transaction; heartbeats write it
--     under the attempt's lock), so the counts tell, without expanding the batch, that an
--     open attempt never heartbeated. A batch with a lease on every open attempt is set
--     aside for good (all_leased, migration 0015): its attempts are watched by their
--     leases;
--   - heartbeat-stale leases: running leases last heartbeated before the cutoff (partial
--     index on the running ones, migration 0015; a parked lease is never heartbeat-stale);
--   - deadline: batches past deadline_at (partial index), with attempts still open;
--   - callback timeout: parked leases past callback_timeout_at (partial index, migration
--     0015).
-- Candidates are taken oldest claim first while the stale attempts they are known to hold
-- stay under p_limit; only they are expanded. They are then locked like any closer's and
-- judged attempt by attempt with a snapshot taken after the locks, so a heartbeat or
-- completion that got there first is respected.
--
-- Cost of a call: an index entry and a row for each retained batch claimed before the
-- cutoff and for each running lease; one closure probe for each such batch not set aside
-- (a closed one until prune removes it, as before; an open one until its attempts all
-- have leases, usually once) and one lease probe for each open one. Parked callbacks
-- and long heartbeating jobs cost no probe once set aside. Measured on PostgreSQL 15 (two
-- busy cores, load average 6), a call with nothing to do: behind 1,500 parked callbacks
-- in 1,500 batches, 0.6-0.8 ms, where the old scan took 200-270 ms and never reached the
-- stale attempts behind them; behind 1,500 long heartbeating jobs, 0.7-4 ms (old:
-- 200-225 ms); behind 20,000 parked, 5-20 ms (old: 2.7-6 s). The one call that set 20,000
-- batches aside took 1.3 s (at load average 12).
CREATE OR REPLACE FUNCTION {schema}.rescue_stale_attempts(p_stale interval, p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, state text, why text)
LANGUAGE plpgsql
-- Generic plans: the candidate scan plans in about 1 ms over the partitions and runs in
-- a fraction of that; the leader calls this every second with the same arguments.
SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_cutoff  timestamptz := now() - p_stale;
    v_batches bigint[];
    v_leased  bigint[];
    v_b       bigint[];
    v_seq     bigint[];
    v_job     bigint[];
    v_why     text[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'rescue_stale_attempts: the limit must be at least 1' USING ERRCODE = '22023';
    END IF;

    -- Four index-backed sources (one OR over them would scan every retained batch).
    WITH receipts AS MATERIALIZED (
        -- Batches claimed before the cutoff, still open, not yet known to have a lease on
        -- every open attempt: their open attempts without a lease are receipt-only, and
        -- stale. A batch that has one on each is set aside (all_leased).
        SELECT o.batch_id, o.claimed_at, n.n_open, l.n_leased
        FROM {schema}.claim_batches o
        CROSS JOIN LATERAL (
            SELECT o.n_items - coalesce(sum(c.n_closed), 0) AS n_open
            FROM {schema}.claim_closures c
            WHERE c.claim_slot = o.claim_slot AND c.batch_id = o.batch_id) n
        CROSS JOIN LATERAL (
            -- distinct attempts: two leases of one attempt (written in two lease slots by
            -- racing first heartbeats) must not hide a receipt-only sibling
            SELECT count(DISTINCT l.lane_seq) AS n_leased
            FROM {schema}.leases l
            WHERE l.claim_batch = o.batch_id) l
        WHERE o.claimed_at < v_cutoff AND NOT o.all_leased AND n.n_open > 0),
    -- Each candidate batch with a lower bound of the stale attempts it holds.
    candidates AS (
        SELECT r.batch_id, r.claimed_at, r.n_open - r.n_leased AS n_stale
        FROM receipts r
        WHERE r.n_open > r.n_leased
        UNION ALL
        -- running leases whose last heartbeat is before the cutoff (a lease exists only
        -- while its attempt is open), unless the attempt has a livelier lease too
        SELECT w.batch_id, w.claimed_at, count(DISTINCT l.lane_seq)
        FROM {schema}.leases l
        JOIN {schema}.claim_batches w ON w.batch_id = l.claim_batch
        WHERE l.state = 'running' AND l.heartbeat_at < v_cutoff
          AND NOT EXISTS (SELECT 1 FROM {schema}.leases k
                          WHERE k.claim_batch = l.claim_batch AND k.lane_seq = l.lane_seq
                            AND (k.state = 'waiting_external' OR k.heartbeat_at >= v_cutoff))
        GROUP BY w.batch_id, w.claimed_at
        UNION ALL
        SELECT d.batch_id, d.claimed_at, n.n_open
        FROM {schema}.claim_batches d
        CROSS JOIN LATERAL (
            SELECT d.n_items - coalesce(sum(c.n_closed), 0) AS n_open
            FROM {schema}.claim_closures c
            WHERE c.claim_slot = d.claim_slot AND c.batch_id = d.batch_id) n
        WHERE d.deadline_at < now() AND n.n_open > 0
        UNION ALL
        SELECT w.batch_id, w.claimed_at, count(DISTINCT l.lane_seq)
        FROM {schema}.leases l
        JOIN {schema}.claim_batches w ON w.batch_id = l.claim_batch
        WHERE l.state = 'waiting_external' AND l.callback_timeout_at < now()
        GROUP BY w.batch_id, w.claimed_at),
    -- Oldest claim first, while the stale attempts known before stay under the limit.
    taken AS (
        SELECT c.batch_id, c.claimed_at,
               sum(max(c.n_stale)) OVER (ORDER BY c.claimed_at, c.batch_id) - max(c.n_stale) AS before
        FROM candidates c
        GROUP BY c.batch_id, c.claimed_at)
    SELECT (SELECT array_agg(t.batch_id ORDER BY t.claimed_at, t.batch_id)
            FROM taken t WHERE t.before < p_limit),
           (SELECT array_agg(r.batch_id) FROM receipts r WHERE r.n_leased = r.n_open)
    INTO v_batches, v_leased;

    IF v_leased IS NOT NULL THEN
        UPDATE {schema}.claim_batches b
        SET all_leased = true
        WHERE b.batch_id = ANY (v_leased) AND NOT b.all_leased;
    END IF;
    IF v_batches IS NULL THEN
        RETURN;
    END IF;

    PERFORM pg_advisory_xact_lock(hashtext('{schema}:attempts'), k.key)
    FROM (SELECT DISTINCT {schema}.attempt_lock_key(b) AS key FROM unnest(v_batches) b ORDER BY 1) k;

    SELECT array_agg(s.batch_id ORDER BY s.claimed_at, s.batch_id, s.lane_seq),
           array_agg(s.lane_seq ORDER BY s.claimed_at, s.batch_id, s.lane_seq),
           array_agg(s.job_id ORDER BY s.claimed_at, s.batch_id, s.lane_seq),
           array_agg(s.why ORDER BY s.claimed_at, s.batch_id, s.lane_seq)
    INTO v_b, v_seq, v_job, v_why
    FROM (SELECT j.*
          FROM (SELECT o.batch_id, o.lane_seq, o.job_id, o.claimed_at,
                       CASE
                           WHEN o.deadline_at IS NOT NULL AND o.deadline_at < now() THEN 'deadline exceeded'
                           WHEN l.state = 'waiting_external' AND l.callback_timeout_at < now() THEN 'callback timed out'
                           WHEN l.state = 'waiting_external' THEN NULL
                           WHEN coalesce(l.heartbeat_at, o.claimed_at) < v_cutoff THEN 'heartbeat stale'
                       END AS why
                FROM {schema}.open_attempts(v_batches) o
                LEFT JOIN LATERAL (
                    -- the livelier of two leases of one attempt (see above)
                    SELECT l.state, l.heartbeat_at, l.callback_timeout_at
                    FROM {schema}.leases l
                    WHERE l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq
                    ORDER BY l.state = 'waiting_external' DESC, l.heartbeat_at DESC
                    LIMIT 1) l ON true) j
          WHERE j.why IS NOT NULL
          ORDER BY j.claimed_at, j.batch_id, j.lane_seq
          LIMIT p_limit) s;
    IF v_b IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    SELECT v_job[c.ord], c.state, 'rescued: ' || v_why[c.ord]
    FROM {schema}.close_attempts(v_b, v_seq, array_fill('rescue'::text, ARRAY[cardinality(v_b)]),
                                 ARRAY(SELECT 'rescued: ' || w.why
                                       FROM unnest(v_why) WITH ORDINALITY AS w(why, ord)
                                       ORDER BY w.ord)) c
    ORDER BY c.ord;
END
$$;

-- Cancels a job wherever it is. Returns what was found:
--   'scheduled'  deferred (not yet runnable): removed; its body and a cancelled done row
--                kept on lane_seq = -job_id
--   'available'  ready, not claimed: tombstoned so no claim hands it out, cancelled done row
--   'running'    claimed, attempt open: the attempt is closed as cancelled (its completion
--                becomes stale) and 'awa:cancel' is notified with the job id so the
--                worker can stop the handler
--   'waiting'    waiting for its parents: ended as cancelled, its body and done row kept
--                on lane_seq = -job_id
--   'finished'   already terminal or closed;  'missing' no such job.
-- A job cancelled while waiting, scheduled or available is applied to its children here
-- (resolve_parent_ends); one cancelled while running, by close_attempts.
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
    v_qid   integer;
    v_deps  boolean;
BEGIN
    -- Waiting for parents: its row lock first, then (in end_waiting_jobs) its end lock, the
    -- order every ender of a waiting job takes them in.
    PERFORM 1 FROM {schema}.waiting_jobs w WHERE w.job_id = p_job_id FOR UPDATE;
    IF FOUND THEN
        PERFORM {schema}.end_waiting_jobs(ARRAY[p_job_id], ARRAY['cancelled'],
                                          ARRAY['cancelled while waiting for its parents']);
        PERFORM {schema}.resolve_parent_ends(ARRAY[p_job_id], ARRAY['cancelled']);
        RETURN 'waiting';
    END IF;
    -- The end lock: the maintenance leader does not re-read this job's state for its
    -- children while this cancel is in flight (verify_waiting_jobs), and the pending-edge
    -- probe below comes after it.
    PERFORM pg_advisory_xact_lock(hashtext('{schema}:job-end'), {schema}.job_end_lock_key(p_job_id));
    -- children waiting for it, or a batch it counts in (0069_batches.sql)
    v_deps := EXISTS (SELECT 1 FROM {schema}.job_dependencies d
                      WHERE d.parent_id = p_job_id AND d.resolved_at IS NULL)
              OR EXISTS (SELECT 1 FROM {schema}.batch_members m
                         WHERE m.job_id = p_job_id AND m.state IS NULL);

    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_def;
    IF FOUND THEN
        -- The body stays on a ready row at lane_seq = -job_id, beside the done row, so the
        -- job can be shown and retried like any cancelled job (retry_job). No lane
        -- produces that key, and every reader of pending work takes rows at or after a
        -- claim cursor (>= 1), so it is history: never claimed, counted, carried or
        -- found pending by prune. The slot is held for write, as a producer's is.
        v_slot := {schema}.ready_slot_for_write();
        v_qid := {schema}.ensure_queue_id(v_def.queue);
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args, attempt,
             run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags, errors)
        VALUES (v_slot, v_qid, v_def.priority, 0, -v_def.job_id, v_def.job_id, v_def.kind,
                v_def.args, v_def.attempt, v_def.run_lease, v_def.max_attempts, v_def.run_at,
                v_def.created_at, v_def.ordering_key, v_def.metadata, v_def.tags, v_def.errors);
        INSERT INTO {schema}.done_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
        VALUES (v_slot, v_qid, v_def.priority, 0, -v_def.job_id, v_def.job_id, v_def.run_lease,
                v_def.attempt, 'cancelled', 'cancelled while scheduled');
        IF v_deps THEN
            PERFORM {schema}.resolve_parent_ends(ARRAY[p_job_id], ARRAY['cancelled']);
        END IF;
        RETURN 'scheduled';
    END IF;

    -- Not claimed yet: at or after its lane's claim cursor.
    SELECT r.ready_slot, r.queue_id, r.priority, r.enqueue_shard, r.lane_seq, r.run_lease, r.attempt
    INTO v_ready
    FROM {schema}.queue_claim_heads c
    CROSS JOIN unnest({schema}.ring_live_slots('queue')) AS s(slot)
    JOIN {schema}.ready_entries r
      ON r.ready_slot = s.slot AND r.queue_id = c.queue_id AND r.priority = c.priority
     AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
    WHERE r.job_id = p_job_id
      -- a moved job's old row is tombstoned; its live row is elsewhere
      AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id
                        AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq)
    LIMIT 1;
    IF FOUND THEN
        -- Serialise with claimers of this lane: once we hold the head, the row is either
        -- behind the cursor (claimed) or not (and no claim can take it before we commit).
        SELECT c.claim_seq INTO v_claim
        FROM {schema}.queue_claim_heads c
        WHERE c.queue_id = v_ready.queue_id AND c.priority = v_ready.priority
          AND c.enqueue_shard = v_ready.enqueue_shard
        FOR UPDATE;
        IF v_ready.lane_seq >= v_claim THEN
            INSERT INTO {schema}.ready_tombstones (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id)
            VALUES (v_ready.ready_slot, v_ready.queue_id, v_ready.priority, v_ready.enqueue_shard,
                    v_ready.lane_seq, p_job_id)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 0 THEN
                RETURN 'finished';
            END IF;
            INSERT INTO {schema}.done_entries
                (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt, state, error)
            VALUES (v_ready.ready_slot, v_ready.queue_id, v_ready.priority, v_ready.enqueue_shard,
                    v_ready.lane_seq, p_job_id, v_ready.run_lease, v_ready.attempt, 'cancelled',
                    'cancelled before it ran');
            IF v_deps THEN
                PERFORM {schema}.resolve_parent_ends(ARRAY[p_job_id], ARRAY['cancelled']);
            END IF;
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
