-- Jobs as an operator sees them (issue 12: `awa job list`, `awa job show`).
--
-- A job has no state column: where it is says what it is.
--   scheduled / retryable  a deferred_jobs row (reason scheduled, snooze / retry, rescue);
--   available              a ready row at or after its lane's claim cursor, not tombstoned;
--   running / waiting      an open attempt (open_attempts()), waiting when its materialised
--                          lease is in state waiting_external;
--   dlq                    a dlq_entries row;
--   completed / failed / cancelled
--                          the end of its last attempt: a done row on the ready row's key
--                          (failed, cancelled; completed for rows written before
--                          migration 0002 and for a success that kept an external
--                          callback's result, migration 0011), or a claimed ready row
--                          with no done row and no open attempt — a success, which
--                          writes no per-job row (its claim_closures row may already be
--                          pruned: the claim ring is shorter than the queue ring, so it
--                          is not looked for).
-- Every other retained row is history: a tombstoned row without a done row was moved
-- (move_queue, set_job_priority, age_waiting_priorities), a done row retried / snoozed /
-- rescued / dlq was followed by a newer row. Every transition of the engine moves a job
-- between these places in one transaction, so one statement (one snapshot) finds each job
-- exactly once; DISTINCT ON by job_id with a fixed precedence keeps that true even if it
-- ever were not.

-- Times as every admin result shows them: ISO 8601, UTC, milliseconds.
CREATE OR REPLACE FUNCTION {schema}.iso_utc(p_at timestamptz)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A job's error history (append_error's [{attempt, error, at}]) with the times as iso_utc.
CREATE OR REPLACE FUNCTION {schema}.errors_iso(p_errors jsonb)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'attempt', coalesce((e.value ->> 'attempt')::integer, 0),
               'error', coalesce(e.value ->> 'error', ''),
               'at', coalesce({schema}.iso_utc((e.value ->> 'at')::timestamptz), ''))
             ORDER BY e.ord), '[]'::jsonb)
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_errors) = 'array' THEN p_errors
                                   ELSE '[]'::jsonb END) WITH ORDINALITY AS e(value, ord)
$$;

CREATE OR REPLACE FUNCTION {schema}.check_job_state(p_state text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_state IS NOT NULL AND p_state NOT IN ('waiting', 'scheduled', 'retryable', 'available', 'running',
                                               'waiting_external', 'completed', 'failed', 'cancelled', 'dlq') THEN
        RAISE EXCEPTION 'unknown job state "%" (expected waiting, scheduled, retryable, available, running, waiting_external, completed, failed, cancelled or dlq)',
            p_state USING ERRCODE = '22023';
    END IF;
END
$$;

-- The jobs matching every filter given (NULL: any; p_job_ids: one of these ids), one row
-- each, by id, at most p_limit (NULL: all). For a ready-row state, (ready_slot, queue, priority, enqueue_shard,
-- lane_seq) is the row that places it and claim_batch its open attempt's batch;
-- enqueue_shard is NULL for a job without a lane (deferred, dead letter, cancelled while
-- scheduled: its retained row sits at lane_seq = -job_id). attempt: attempts started so
-- far. For dead letters run_at is when the job was dead-lettered.
--
-- Cost: every retained ready row that passes the filters, with a primary-key probe of its
-- done row and tombstone, plus the open attempts (O(open batches)); p_job_id and p_after
-- use the BRIN job_id indexes. Custom plans, so a NULL filter costs nothing.
DROP FUNCTION IF EXISTS {schema}.job_states(bigint, text, text, text, bigint, integer);
CREATE OR REPLACE FUNCTION {schema}.job_states(
    p_job_id bigint DEFAULT NULL, p_queue text DEFAULT NULL, p_state text DEFAULT NULL,
    p_kind text DEFAULT NULL, p_after bigint DEFAULT NULL, p_limit integer DEFAULT NULL,
    p_job_ids bigint[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, state text, queue text, kind text, priority smallint,
               attempt smallint, max_attempts smallint, enqueue_shard smallint,
               ready_slot smallint, lane_seq bigint, run_lease bigint, created_at timestamptz,
               run_at timestamptz, claim_batch bigint)
LANGUAGE plpgsql STABLE
SET jit = off
SET plan_cache_mode = force_custom_plan AS $$
#variable_conflict use_column
BEGIN
    PERFORM {schema}.check_job_state(p_state);
    IF p_limit IS NOT NULL AND p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'limit % is outside 1..10000', p_limit USING ERRCODE = '22023';
    END IF;

    RETURN QUERY
    WITH ready AS MATERIALIZED (
        SELECT r.ready_slot, r.queue_id, qi.queue, r.priority, r.enqueue_shard, r.lane_seq,
               r.job_id, r.kind,
               r.attempt, r.run_lease, r.max_attempts, r.run_at, r.created_at, c.claim_seq,
               d.state AS done_state, d.attempt AS done_attempt, d.run_lease AS done_lease,
               EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                       WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id
                         AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                         AND t.lane_seq = r.lane_seq) AS tombstoned
        FROM {schema}.ready_entries r
        JOIN {schema}.queue_ids qi ON qi.queue_id = r.queue_id
        LEFT JOIN {schema}.queue_claim_heads c
          ON c.queue_id = r.queue_id AND c.priority = r.priority AND c.enqueue_shard = r.enqueue_shard
        LEFT JOIN {schema}.done_entries d
          ON d.ready_slot = r.ready_slot AND d.queue_id = r.queue_id AND d.priority = r.priority
         AND d.enqueue_shard = r.enqueue_shard AND d.lane_seq = r.lane_seq
        WHERE (p_job_id IS NULL OR r.job_id = p_job_id)
          AND (p_job_ids IS NULL OR r.job_id = ANY (p_job_ids))
          AND (p_after IS NULL OR r.job_id > p_after)
          AND (p_queue IS NULL OR qi.queue = p_queue)
          AND (p_kind IS NULL OR r.kind = p_kind)
          AND (p_state IS NULL OR p_state IN ('available', 'running', 'waiting_external',
                                              'completed', 'failed', 'cancelled'))),
    open AS MATERIALIZED (
        SELECT o.batch_id, o.ready_slot, o.queue_id, o.priority, o.enqueue_shard, o.lane_seq,
               l.state AS lease_state
        FROM {schema}.open_attempts() o
        LEFT JOIN {schema}.leases l ON l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq
        WHERE (p_job_id IS NULL OR o.job_id = p_job_id)
          AND (p_job_ids IS NULL OR o.job_id = ANY (p_job_ids))
          AND (p_state IS NULL OR p_state IN ('running', 'waiting_external', 'completed'))),
    located AS (
        SELECT w.job_id, 'waiting' AS state, w.queue, w.kind, w.priority, 0::smallint AS attempt,
               w.max_attempts, NULL::smallint AS enqueue_shard, NULL::smallint AS ready_slot,
               NULL::bigint AS lane_seq, 0::bigint AS run_lease, w.created_at, w.run_at,
               NULL::bigint AS claim_batch, 1 AS rank
        FROM {schema}.waiting_jobs w
        WHERE (p_job_id IS NULL OR w.job_id = p_job_id)
          AND (p_job_ids IS NULL OR w.job_id = ANY (p_job_ids))
          AND (p_after IS NULL OR w.job_id > p_after)
          AND (p_queue IS NULL OR w.queue = p_queue)
          AND (p_kind IS NULL OR w.kind = p_kind)
          AND (p_state IS NULL OR p_state = 'waiting')
        UNION ALL
        SELECT d.job_id,
               CASE WHEN d.reason IN ('scheduled', 'snooze') THEN 'scheduled' ELSE 'retryable' END AS state,
               d.queue, d.kind, d.priority, d.attempt, d.max_attempts, NULL::smallint AS enqueue_shard,
               NULL::smallint AS ready_slot, NULL::bigint AS lane_seq, d.run_lease, d.created_at,
               d.run_at, NULL::bigint AS claim_batch, 1 AS rank
        FROM {schema}.deferred_jobs d
        WHERE (p_job_id IS NULL OR d.job_id = p_job_id)
          AND (p_job_ids IS NULL OR d.job_id = ANY (p_job_ids))
          AND (p_after IS NULL OR d.job_id > p_after)
          AND (p_queue IS NULL OR d.queue = p_queue)
          AND (p_kind IS NULL OR d.kind = p_kind)
          AND (p_state IS NULL OR p_state IN ('scheduled', 'retryable'))
        UNION ALL
        SELECT r.job_id,
               CASE WHEN r.done_state IS NOT NULL THEN r.done_state
                    WHEN r.lane_seq >= r.claim_seq THEN 'available'
                    WHEN o.batch_id IS NULL THEN 'completed'
                    WHEN o.lease_state = 'waiting_external' THEN 'waiting_external'
                    ELSE 'running' END,
               r.queue, r.kind, r.priority,
               (CASE WHEN r.done_state IS NOT NULL THEN r.done_attempt
                     WHEN r.lane_seq >= r.claim_seq THEN r.attempt
                     ELSE r.attempt + 1 END)::smallint,
               r.max_attempts,
               CASE WHEN r.lane_seq > 0 THEN r.enqueue_shard END,
               r.ready_slot, r.lane_seq,
               CASE WHEN r.done_state IS NOT NULL THEN r.done_lease
                    WHEN r.lane_seq >= r.claim_seq THEN r.run_lease
                    ELSE r.run_lease + 1 END,
               r.created_at, r.run_at, o.batch_id,
               CASE WHEN r.done_state IS NOT NULL THEN 5
                    WHEN r.lane_seq >= r.claim_seq THEN 2
                    WHEN o.batch_id IS NULL THEN 5
                    ELSE 3 END
        FROM ready r
        LEFT JOIN open o
          ON o.ready_slot = r.ready_slot AND o.queue_id = r.queue_id AND o.priority = r.priority
         AND o.enqueue_shard = r.enqueue_shard AND o.lane_seq = r.lane_seq
        WHERE r.done_state IN ('completed', 'failed', 'cancelled')
           OR (r.done_state IS NULL AND NOT r.tombstoned AND r.lane_seq > 0
               AND r.claim_seq IS NOT NULL)
        UNION ALL
        SELECT x.job_id, 'dlq', x.queue, x.kind, x.priority, x.attempt, x.max_attempts,
               NULL::smallint, NULL::smallint, NULL::bigint, x.run_lease, x.created_at, x.dlq_at,
               NULL::bigint, 4
        FROM {schema}.dlq_entries x
        WHERE (p_job_id IS NULL OR x.job_id = p_job_id)
          AND (p_job_ids IS NULL OR x.job_id = ANY (p_job_ids))
          AND (p_after IS NULL OR x.job_id > p_after)
          AND (p_queue IS NULL OR x.queue = p_queue)
          AND (p_kind IS NULL OR x.kind = p_kind)
          AND (p_state IS NULL OR p_state = 'dlq')
        UNION ALL
        -- Terminal rows without a retained body: jobs cancelled while scheduled before
        -- cancel_job kept one. Counted by queue_counts_exact, so listed (kind unknown).
        SELECT d.job_id, d.state, qi.queue, ''::text, d.priority, d.attempt, 0::smallint,
               NULL::smallint, d.ready_slot, d.lane_seq, d.run_lease, d.finished_at,
               d.finished_at, NULL::bigint, 5
        FROM {schema}.done_entries d
        JOIN {schema}.queue_ids qi ON qi.queue_id = d.queue_id
        WHERE d.state IN ('completed', 'failed', 'cancelled')
          AND (p_job_id IS NULL OR d.job_id = p_job_id)
            AND (p_job_ids IS NULL OR d.job_id = ANY (p_job_ids))
          AND (p_after IS NULL OR d.job_id > p_after)
          AND (p_queue IS NULL OR qi.queue = p_queue)
          AND p_kind IS NULL
          AND (p_state IS NULL OR p_state IN ('completed', 'failed', 'cancelled'))
          AND NOT EXISTS (SELECT 1 FROM {schema}.ready_entries r
                          WHERE r.ready_slot = d.ready_slot AND r.queue_id = d.queue_id
                            AND r.priority = d.priority AND r.enqueue_shard = d.enqueue_shard
                            AND r.lane_seq = d.lane_seq))
    SELECT s.job_id, s.state, s.queue, s.kind, s.priority, s.attempt, s.max_attempts,
           s.enqueue_shard, s.ready_slot, s.lane_seq, s.run_lease, s.created_at, s.run_at,
           s.claim_batch
    FROM (SELECT DISTINCT ON (l.job_id) l.*
          FROM located l
          ORDER BY l.job_id, l.rank) AS s
    WHERE p_state IS NULL OR s.state = p_state
    ORDER BY s.job_id
    LIMIT p_limit;
END
$$;

-- Everything retained about one job, in one snapshot (a STABLE function: every statement
-- reads the caller's snapshot); no row when no trace is retained. Times are iso_utc text.
--   errors    the error history on its current row, plus the last failed attempt's error,
--             which only its done row holds;
--   progress  the open attempt's last reported progress (its materialised lease);
--   timeline  [{at, event, attempt, enqueue_shard, detail}], oldest first: created,
--             scheduled (deferred until ...), claimed (one per claim batch that took one of
--             its ready rows), each attempt's end (its done row, or its completed closure),
--             dlq, and the operator's retries and moves (job_events). A success whose
--             closure was pruned has no time: "at" is null, and it sorts last.
CREATE OR REPLACE FUNCTION {schema}.job_detail(p_job_id bigint)
RETURNS TABLE (job_id bigint, state text, queue text, kind text, priority smallint,
               attempt smallint, max_attempts smallint, enqueue_shard smallint,
               created_at text, run_at text, args text, metadata text, tags jsonb,
               ordering_key bytea, lane_seq bigint, run_lease bigint, errors jsonb,
               progress text, timeline jsonb)
LANGUAGE plpgsql STABLE
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v        record;
    v_body   record;
    v_errors jsonb;
    v_last   record;
    v_prog   text;
    v_events jsonb;
BEGIN
    SELECT * INTO v FROM {schema}.job_states(p_job_id) s;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    IF v.state = 'waiting' THEN
        SELECT w.args, w.metadata, w.tags, w.ordering_key, NULL::jsonb AS errors,
               NULL::text AS reason, NULL::timestamptz AS dlq_at
        INTO v_body FROM {schema}.waiting_jobs w WHERE w.job_id = p_job_id;
    ELSIF v.state IN ('scheduled', 'retryable') THEN
        SELECT d.args, d.metadata, d.tags, d.ordering_key, d.errors, d.reason, NULL::timestamptz AS dlq_at
        INTO v_body FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id;
    ELSIF v.state = 'dlq' THEN
        SELECT d.args, d.metadata, d.tags, d.ordering_key, d.errors, d.reason, d.dlq_at
        INTO v_body FROM {schema}.dlq_entries d WHERE d.job_id = p_job_id;
    ELSE
        SELECT r.args, r.metadata, r.tags, r.ordering_key, r.errors, NULL::text AS reason,
               NULL::timestamptz AS dlq_at
        INTO v_body FROM {schema}.ready_entries r
        WHERE r.ready_slot = v.ready_slot AND r.queue_id = {schema}.queue_id_of(v.queue)
          AND r.priority = v.priority
          AND r.enqueue_shard = coalesce(v.enqueue_shard, 0) AND r.lane_seq = v.lane_seq;
    END IF;

    v_errors := coalesce(v_body.errors, '[]'::jsonb);
    IF v.state = 'failed' THEN
        SELECT d.attempt, d.error, d.finished_at INTO v_last
        FROM {schema}.done_entries d
        WHERE d.ready_slot = v.ready_slot AND d.queue_id = {schema}.queue_id_of(v.queue)
          AND d.priority = v.priority
          AND d.enqueue_shard = coalesce(v.enqueue_shard, 0) AND d.lane_seq = v.lane_seq;
        IF FOUND AND v_last.error IS NOT NULL THEN
            v_errors := v_errors || jsonb_build_array(jsonb_build_object(
                'attempt', v_last.attempt, 'error', v_last.error, 'at', v_last.finished_at));
        END IF;
    END IF;

    IF v.claim_batch IS NOT NULL THEN
        SELECT l.progress::text INTO v_prog
        FROM {schema}.leases l
        WHERE l.claim_batch = v.claim_batch AND l.lane_seq = v.lane_seq;
    END IF;

    WITH rows AS MATERIALIZED (
        SELECT r.ready_slot, r.queue_id, qi.queue, r.priority, r.enqueue_shard, r.lane_seq,
               r.attempt, r.run_lease, r.run_at, r.created_at,
               EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                       WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id
                         AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                         AND t.lane_seq = r.lane_seq) AS tombstoned
        FROM {schema}.ready_entries r
        JOIN {schema}.queue_ids qi ON qi.queue_id = r.queue_id
        WHERE r.job_id = p_job_id),
    claims AS MATERIALIZED (
        -- A claim skips tombstoned rows, and a row is only ever tombstoned before it is
        -- claimed: a batch whose range covers a live row took it.
        SELECT b.claim_slot, b.batch_id, b.claimed_at, r.lane_seq, r.enqueue_shard,
               (r.attempt + 1)::smallint AS attempt,
               format('queue %s, priority %s, lane_seq %s', r.queue, r.priority, r.lane_seq) AS detail
        FROM rows r
        JOIN {schema}.claim_batches b
          ON b.queue_id = r.queue_id AND b.priority = r.priority AND b.enqueue_shard = r.enqueue_shard
         AND r.lane_seq BETWEEN b.first_seq AND b.last_seq
        WHERE NOT r.tombstoned AND r.lane_seq > 0),
    events AS (
        SELECT v.created_at AS at, 'created'::text AS event, 0 AS attempt,
               NULL::integer AS shard, ''::text AS detail, 0 AS ord
        UNION ALL
        -- Created with a future run_at and promoted since: its first row keeps the due time
        -- (so do the copies a move leaves behind, hence one event).
        SELECT min(r.created_at), 'scheduled', 0, NULL, 'until ' || {schema}.iso_utc(min(r.run_at)), 1
        FROM rows r
        WHERE r.run_lease = 0 AND r.run_at > r.created_at AND r.lane_seq > 0
        HAVING count(*) > 0
        UNION ALL
        SELECT c.claimed_at, 'claimed', c.attempt, c.enqueue_shard, c.detail, 2
        FROM claims c
        UNION ALL
        SELECT x.closed_at, 'completed', c.attempt, c.enqueue_shard, '', 3
        FROM claims c
        JOIN {schema}.claim_closures x
          ON x.claim_slot = c.claim_slot AND x.batch_id = c.batch_id AND x.outcome = 'completed'
         AND x.lane_seqs @> c.lane_seq
        UNION ALL
        SELECT NULL::timestamptz, 'completed', v.attempt, v.enqueue_shard, 'claim history pruned', 3
        WHERE v.state = 'completed' AND v.lane_seq > 0
          AND NOT EXISTS (SELECT 1 FROM claims c
                          JOIN {schema}.claim_closures x
                            ON x.claim_slot = c.claim_slot AND x.batch_id = c.batch_id
                           AND x.outcome = 'completed' AND x.lane_seqs @> c.lane_seq)
          -- a success that kept a result has its done row (listed below) instead
          AND NOT EXISTS (SELECT 1 FROM {schema}.done_entries d
                          WHERE d.job_id = p_job_id AND d.state = 'completed')
        UNION ALL
        SELECT d.finished_at, d.state, d.attempt,
               CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, coalesce(d.error, ''), 3
        FROM {schema}.done_entries d
        WHERE d.job_id = p_job_id
        UNION ALL
        -- Deferred now: since its last attempt ended (or since it was created).
        SELECT coalesce((SELECT max(d.finished_at) FROM {schema}.done_entries d
                         WHERE d.job_id = p_job_id AND d.run_lease = v.run_lease
                           AND d.state IN ('retried', 'snoozed', 'rescued')), v.created_at),
               'scheduled', v.attempt, NULL,
               format('until %s (%s)', {schema}.iso_utc(v.run_at), v_body.reason), 4
        WHERE v.state IN ('scheduled', 'retryable')
        UNION ALL
        SELECT v_body.dlq_at, 'dlq', v.attempt, NULL, coalesce(v_body.reason, ''), 4
        WHERE v.state = 'dlq'
          AND NOT EXISTS (SELECT 1 FROM {schema}.done_entries d
                          WHERE d.job_id = p_job_id AND d.state = 'dlq' AND d.run_lease = v.run_lease)
        UNION ALL
        SELECT e.at, e.event, e.attempt, e.enqueue_shard, e.detail, 5
        FROM {schema}.job_events e
        WHERE e.job_id = p_job_id)
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'at', {schema}.iso_utc(e.at), 'event', e.event, 'attempt', e.attempt,
               'enqueue_shard', e.shard, 'detail', e.detail)
             ORDER BY e.at NULLS LAST, e.ord), '[]'::jsonb)
    INTO v_events
    FROM events e;

    RETURN QUERY SELECT v.job_id, v.state, v.queue, v.kind, v.priority, v.attempt,
                        v.max_attempts, v.enqueue_shard, {schema}.iso_utc(v.created_at),
                        {schema}.iso_utc(v.run_at), coalesce(v_body.args::text, 'null'),
                        coalesce(v_body.metadata::text, 'null'), to_jsonb(v_body.tags),
                        v_body.ordering_key, CASE WHEN v.lane_seq > 0 THEN v.lane_seq END,
                        v.run_lease, {schema}.errors_iso(v_errors), v_prog, v_events;
END
$$;

-- The readers behind `awa job list` and `awa job show` (sql/queries/admin/list_jobs.sql,
-- job_detail.sql): the rings locked first (lock_rings_shared, 0050_queue_counts.sql), then one
-- reading statement, so a job that a prune carries or truncates while they read is seen
-- where the committed prune left it. job_states and job_detail stay STABLE: the writers
-- (0056_job_moves.sql, 0025_unique.sql) call them inside their own statements.
CREATE OR REPLACE FUNCTION {schema}.job_list(
    p_queue text, p_state text, p_kind text, p_after bigint, p_limit integer)
RETURNS TABLE (job_id bigint, state text, queue text, kind text, priority smallint,
               attempt smallint, max_attempts smallint, enqueue_shard smallint,
               created_at text, run_at text)
LANGUAGE plpgsql VOLATILE
SET jit = off AS $$
BEGIN
    PERFORM {schema}.lock_rings_shared(ARRAY['queue', 'claim', 'lease']);
    RETURN QUERY
    SELECT s.job_id, s.state, s.queue, s.kind, s.priority, s.attempt, s.max_attempts,
           s.enqueue_shard, {schema}.iso_utc(s.created_at), {schema}.iso_utc(s.run_at)
    FROM {schema}.job_states(NULL::bigint, p_queue, p_state, p_kind, p_after, p_limit) s;
END
$$;

-- job_detail plus the callback id its open attempt registered, if any (leases.callback_id:
-- what an operator passes to `awa callback complete|fail`), and the result a completed
-- job's callback or handler answered with (its done row, migration 0011), and its
-- dependencies (job_dependencies_json, 0067_dependencies.sql).
DROP FUNCTION IF EXISTS {schema}.job_view(bigint);
CREATE OR REPLACE FUNCTION {schema}.job_view(p_job_id bigint)
RETURNS TABLE (job_id bigint, state text, queue text, kind text, priority smallint,
               attempt smallint, max_attempts smallint, enqueue_shard smallint,
               created_at text, run_at text, args text, metadata text, tags text,
               ordering_key bytea, lane_seq bigint, run_lease bigint, errors text,
               progress text, timeline text, callback_id text, result text,
               dependencies text)
LANGUAGE plpgsql VOLATILE
SET jit = off AS $$
BEGIN
    PERFORM {schema}.lock_rings_shared(ARRAY['queue', 'claim', 'lease']);
    RETURN QUERY
    SELECT d.job_id, d.state, d.queue, d.kind, d.priority, d.attempt, d.max_attempts,
           d.enqueue_shard, d.created_at, d.run_at, d.args, d.metadata, d.tags::text,
           d.ordering_key, d.lane_seq, d.run_lease, d.errors::text, d.progress, d.timeline::text,
           (SELECT l.callback_id::text
            FROM {schema}.job_states(p_job_id) s
            JOIN {schema}.leases l ON l.claim_batch = s.claim_batch AND l.lane_seq = s.lane_seq
            WHERE l.callback_id IS NOT NULL),
           CASE WHEN d.state = 'completed' THEN
               (SELECT x.result::text FROM {schema}.done_entries x
                WHERE x.job_id = p_job_id AND x.state = 'completed' AND x.run_lease = d.run_lease
                  AND x.result IS NOT NULL
                LIMIT 1)
           END,
           {schema}.job_dependencies_json(p_job_id)::text
    FROM {schema}.job_detail(p_job_id) d;
END
$$;
