-- Closing attempts: the one function every path that ends an attempt goes through —
-- completion (all outcomes), cancel of a running job, rescue
-- (docs/design/rings.md, "Closing an attempt").
--
-- An attempt is (claim batch, lane_seq). It is closed iff a claim_closures row of its
-- batch lists its lane_seq. The protocol, which models/attempt_lifecycle.pml checks:
--   1. take the exclusive advisory lock of every batch involved, in ascending key order
--      (two closers never deadlock; heartbeats take the same keys shared);
--   2. in a NEW statement — so its snapshot is taken after the locks and shows whatever
--      an earlier holder committed — drop the attempts that are already closed and the
--      repeats within this call (the first occurrence wins);
--   3. append the closure rows and the follow-ups in the same transaction.
-- So every attempt is finalised exactly once whatever races it; a closer that lost is
-- told nothing (the attempt is absent from the result: stale) and changed nothing.
--
-- Costs: a flush of successes writes one claim_closures row per claim batch and nothing
-- per job. Any other end also writes the attempt's done_entries row (its terminal or
-- attempt history, on the ready row's own key), and a retry / snooze / rescue a
-- deferred_jobs row, a DLQ move a dlq_entries row. Those read the ready row for the
-- job's body and the stored max_attempts.
--
-- Outcomes: completed; retry (retried while attempts remain, else failed / dlq); fail
-- (failed / dlq); snooze (deferred, the attempt is given back); cancel; rescue (like
-- retry, due now, reason 'rescue'). Returns (ord, state) for the attempts closed here,
-- ord being the 1-based input position.
--
-- p_results: a result per attempt, kept for 'completed' only (a handler's result, or an
-- external callback's answer). A success with a result is closed like the other ends — its
-- done row (state 'completed', the result) and a 'closed' closure — so it is counted
-- once, from the done row, by every reader; one without stays a bare closure.
--
-- p_follow_ups: per attempt, the handler's follow-up jobs (a JSON array, see
-- enqueue_follow_ups in 0069_batches.sql), enqueued in this transaction when the attempt's
-- end matches their trigger.
--
-- Workflow hooks: while any dependency edge is pending anywhere (0067_dependencies.sql),
-- any batch member has not ended (0069_batches.sql), or a queue of these attempts has a
-- follow-up job, the attempts' ready rows are read for their job ids, and the jobs that
-- ended here are applied in this transaction: the follow-ups, then their children and
-- batches (resolve_parent_ends). Otherwise a flush of successes pays three probes of
-- empty indexes.
DROP FUNCTION IF EXISTS {schema}.close_attempts(bigint[], bigint[], text[], text[], double precision[]);
DROP FUNCTION IF EXISTS {schema}.close_attempts(bigint[], bigint[], text[], text[], double precision[], jsonb[]);
CREATE OR REPLACE FUNCTION {schema}.close_attempts(
    p_batches bigint[],
    p_lane_seqs bigint[],
    p_outcomes text[],
    p_errors text[] DEFAULT NULL,
    p_delays_s double precision[] DEFAULT NULL,
    p_results jsonb[] DEFAULT NULL,
    p_follow_ups jsonb[] DEFAULT NULL)
RETURNS TABLE (ord bigint, state text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_n      integer := coalesce(cardinality(p_batches), 0);
    v_hooks  boolean;
    v_ords   bigint[];
    v_states text[];
    v_jobs   bigint[];
    v_queues text[];
    v_kinds  text[];
    v_errors text[];
    v_specs  jsonb[];
    v_chained boolean[];
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF coalesce(cardinality(p_lane_seqs), 0) <> v_n OR coalesce(cardinality(p_outcomes), 0) <> v_n
       OR coalesce(cardinality(p_errors), v_n) <> v_n OR coalesce(cardinality(p_delays_s), v_n) <> v_n
       OR coalesce(cardinality(p_results), v_n) <> v_n
       OR coalesce(cardinality(p_follow_ups), v_n) <> v_n THEN
        RAISE EXCEPTION 'close_attempts: the input arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
               WHERE o IS NULL OR o NOT IN ('completed', 'retry', 'fail', 'snooze', 'cancel', 'rescue')) THEN
        RAISE EXCEPTION 'close_attempts: unknown outcome (expected completed, retry, fail, snooze, cancel or rescue)'
            USING ERRCODE = '22023';
    END IF;

    PERFORM pg_advisory_xact_lock(hashtext('{schema}:attempts'), k.key)
    FROM (SELECT DISTINCT {schema}.attempt_lock_key(b) AS key FROM unnest(p_batches) b ORDER BY 1) k;

    -- After the locks: an edge committed before a closer took its batch lock is seen
    -- here, and one committed later is the maintenance leader's to re-check. A batch
    -- member is written with its job, so it is visible before the job can be claimed.
    v_hooks := EXISTS (SELECT 1 FROM {schema}.job_dependencies d WHERE d.resolved_at IS NULL)
               OR EXISTS (SELECT 1 FROM {schema}.batch_members m WHERE m.state IS NULL)
               OR (EXISTS (SELECT 1 FROM {schema}.queue_follow_ups)
                   AND EXISTS (SELECT 1 FROM {schema}.claim_batches b
                               JOIN {schema}.queue_ids qi ON qi.queue_id = b.queue_id
                               JOIN {schema}.queue_follow_ups f ON f.queue = qi.queue
                               WHERE b.batch_id = ANY (p_batches)));

    IF 'completed' = ALL (p_outcomes) AND p_results IS NULL AND p_follow_ups IS NULL
       AND NOT v_hooks THEN
        -- The batcher's common case: nothing to read but the batches and their closures.
        RETURN QUERY
        WITH input AS MATERIALIZED (
            SELECT t.batch_id, t.lane_seq, t.ord
            FROM unnest(p_batches, p_lane_seqs) WITH ORDINALITY AS t(batch_id, lane_seq, ord)),
        first AS MATERIALIZED (
            SELECT DISTINCT ON (i.batch_id, i.lane_seq) i.*
            FROM input i ORDER BY i.batch_id, i.lane_seq, i.ord),
        batches AS MATERIALIZED (
            SELECT b.claim_slot, b.batch_id, b.first_seq, b.last_seq
            FROM {schema}.claim_batches b
            WHERE b.batch_id IN (SELECT DISTINCT f.batch_id FROM first f)),
        closed AS MATERIALIZED (
            SELECT c.batch_id, c.lane_seqs
            FROM batches b
            JOIN {schema}.claim_closures c ON c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id),
        open AS MATERIALIZED (
            SELECT f.*, b.claim_slot
            FROM first f
            JOIN batches b ON b.batch_id = f.batch_id
            WHERE f.lane_seq BETWEEN b.first_seq AND b.last_seq
              AND NOT EXISTS (SELECT 1 FROM closed c
                              WHERE c.batch_id = f.batch_id AND c.lane_seqs @> f.lane_seq)),
        ins AS (
            INSERT INTO {schema}.claim_closures (claim_slot, batch_id, outcome, lane_seqs, n_closed)
            SELECT o.claim_slot, o.batch_id, 'completed',
                   range_agg(int8range(o.lane_seq, o.lane_seq, '[]')), count(*)
            FROM open o
            GROUP BY o.claim_slot, o.batch_id),
        -- A materialised attempt's lease row ends with the attempt (normally there is none).
        gone AS (
            DELETE FROM {schema}.leases l
            USING open o
            WHERE l.claim_batch = o.batch_id AND l.lane_seq = o.lane_seq)
        SELECT o.ord, 'completed'::text FROM open o;
        RETURN;
    END IF;

    WITH input AS MATERIALIZED (
        SELECT t.*
        FROM unnest(p_batches, p_lane_seqs, p_outcomes,
                    coalesce(p_errors, array_fill(NULL::text, ARRAY[v_n])),
                    coalesce(p_delays_s, array_fill(NULL::double precision, ARRAY[v_n])),
                    coalesce(p_results, array_fill(NULL::jsonb, ARRAY[v_n])),
                    coalesce(p_follow_ups, array_fill(NULL::jsonb, ARRAY[v_n])))
             WITH ORDINALITY AS t(batch_id, lane_seq, outcome, error, delay_s, result, follow_ups, ord)),
    first AS MATERIALIZED (
        SELECT DISTINCT ON (i.batch_id, i.lane_seq) i.*
        FROM input i ORDER BY i.batch_id, i.lane_seq, i.ord),
    batches AS MATERIALIZED (
        SELECT b.*
        FROM {schema}.claim_batches b
        WHERE b.batch_id IN (SELECT DISTINCT f.batch_id FROM first f)),
    closed AS MATERIALIZED (
        SELECT c.batch_id, c.lane_seqs
        FROM batches b
        JOIN {schema}.claim_closures c ON c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id),
    open AS MATERIALIZED (
        SELECT f.*, b.claim_slot, b.queue_id, qi.queue, b.priority, b.enqueue_shard
        FROM first f
        JOIN batches b ON b.batch_id = f.batch_id
        JOIN {schema}.queue_ids qi ON qi.queue_id = b.queue_id
        WHERE f.lane_seq BETWEEN b.first_seq AND b.last_seq
          AND NOT EXISTS (SELECT 1 FROM closed c
                          WHERE c.batch_id = f.batch_id AND c.lane_seqs @> f.lane_seq)),
    -- The ready row of every attempt that ends other than a bare success: its body, its
    -- stored max_attempts, and the slot it sits in now (prune may have carried it forward).
    -- A success keeps its result only as such: `kept` says it writes a done row.
    decided AS MATERIALIZED (
        SELECT o.*, r.ready_slot, r.job_id, r.run_lease + 1 AS attempt_lease,
               (r.attempt + 1)::smallint AS closed_attempt, r.max_attempts, r.kind, r.args,
               r.created_at, r.ordering_key, r.metadata, r.tags, r.errors,
               CASE o.outcome
                   WHEN 'completed' THEN 'completed'
                   WHEN 'cancel' THEN 'cancelled'
                   WHEN 'snooze' THEN 'snoozed'
                   WHEN 'fail' THEN CASE WHEN coalesce(q.dlq_enabled, false) THEN 'dlq' ELSE 'failed' END
                   ELSE CASE WHEN r.attempt + 1 < r.max_attempts
                                 THEN CASE o.outcome WHEN 'rescue' THEN 'rescued' ELSE 'retried' END
                             WHEN coalesce(q.dlq_enabled, false) THEN 'dlq'
                             ELSE 'failed' END
               END AS state,
               CASE WHEN o.outcome = 'completed' THEN o.result END AS kept
        FROM open o
        LEFT JOIN LATERAL (
            SELECT r.*
            -- live slots read in this statement's snapshot, which postdates any prune
            -- that carried the row (see claim_ready_runtime's guard)
            FROM unnest((SELECT {schema}.ring_live_slots('queue'))) AS s(slot)
            JOIN {schema}.ready_entries r
              ON r.ready_slot = s.slot AND r.queue_id = o.queue_id AND r.priority = o.priority
             AND r.enqueue_shard = o.enqueue_shard AND r.lane_seq = o.lane_seq
            WHERE o.outcome <> 'completed' OR o.result IS NOT NULL OR o.follow_ups IS NOT NULL
                  OR v_hooks
            LIMIT 1) AS r ON true
        LEFT JOIN {schema}.queue_meta q ON q.queue = o.queue
        -- an attempt whose ready row cannot be found is left open, never half-closed
        WHERE (o.outcome = 'completed' AND o.result IS NULL AND o.follow_ups IS NULL)
           OR r.job_id IS NOT NULL),
    closures AS (
        INSERT INTO {schema}.claim_closures (claim_slot, batch_id, outcome, lane_seqs, n_closed)
        SELECT d.claim_slot, d.batch_id,
               CASE WHEN d.state = 'completed' AND d.kept IS NULL THEN 'completed' ELSE 'closed' END,
               range_agg(int8range(d.lane_seq, d.lane_seq, '[]')), count(*)
        FROM decided d
        GROUP BY d.claim_slot, d.batch_id, d.state = 'completed' AND d.kept IS NULL),
    history AS (
        INSERT INTO {schema}.done_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt,
             state, error, result)
        SELECT d.ready_slot, d.queue_id, d.priority, d.enqueue_shard, d.lane_seq, d.job_id,
               d.attempt_lease, d.closed_attempt, d.state, d.error, d.kept
        FROM decided d
        WHERE d.state <> 'completed' OR d.kept IS NOT NULL
        ON CONFLICT DO NOTHING),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
             created_at, ordering_key, metadata, tags, errors, reason)
        SELECT d.job_id, d.queue, d.priority, d.kind, d.args,
               -- a snooze gives the attempt back; a retry or rescue has consumed it
               CASE WHEN d.state = 'snoozed' THEN d.closed_attempt - 1 ELSE d.closed_attempt END,
               d.attempt_lease, d.max_attempts,
               CASE WHEN d.state = 'rescued' THEN now()
                    -- capped at a year: make_interval overflows far above that
                    ELSE now() + make_interval(secs => least(greatest(coalesce(d.delay_s, 0), 0), 31536000))
               END,
               d.created_at, d.ordering_key, d.metadata, d.tags,
               CASE WHEN d.state = 'snoozed' THEN d.errors
                    ELSE {schema}.append_error(d.errors, d.closed_attempt, d.error) END,
               CASE d.state WHEN 'snoozed' THEN 'snooze' WHEN 'rescued' THEN 'rescue' ELSE 'retry' END
        FROM decided d
        WHERE d.state IN ('retried', 'snoozed', 'rescued')),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, created_at,
             ordering_key, metadata, tags, errors, reason)
        SELECT d.job_id, d.queue, d.priority, d.kind, d.args, d.closed_attempt, d.attempt_lease,
               d.max_attempts, d.created_at, d.ordering_key, d.metadata, d.tags,
               {schema}.append_error(d.errors, d.closed_attempt, d.error),
               coalesce(d.error, 'failed')
        FROM decided d
        WHERE d.state = 'dlq'),
    gone AS (
        DELETE FROM {schema}.leases l
        USING decided d
        WHERE l.claim_batch = d.batch_id AND l.lane_seq = d.lane_seq)
    SELECT array_agg(d.ord), array_agg(d.state), array_agg(d.job_id), array_agg(d.queue),
           array_agg(d.kind), array_agg(d.error), array_agg(d.follow_ups),
           array_agg(coalesce(d.metadata ? 'awa.follow_up_of', false))
    INTO v_ords, v_states, v_jobs, v_queues, v_kinds, v_errors, v_specs, v_chained
    FROM decided d;

    RETURN QUERY SELECT x.ord, x.state FROM unnest(v_ords, v_states) AS x(ord, state);
    IF v_hooks OR p_follow_ups IS NOT NULL THEN
        PERFORM {schema}.enqueue_follow_ups(v_jobs, v_states, v_queues, v_kinds, v_errors, v_specs,
                                            v_chained);
    END IF;
    IF v_hooks THEN
        PERFORM {schema}.resolve_parent_ends(v_jobs, v_states);
    END IF;
END
$$;
