-- Counts and lag of a queue for operators and metrics (docs/operations.md): available rows,
-- per-shard lag, exact counts by state, and the shared ring lock the counts take.

-- The queue's available rows: committed ready rows at or after the claim cursor of their
-- own lane (matched on the full lane key, never on lane_seq alone, so two shards' rows with
-- one lane_seq are never confused), over the live slots of the queue ring, not tombstoned.
-- Plain SQL, STABLE and without a SET clause, so PostgreSQL inlines it into the caller's
-- statement (sql/security/function_settings.sql exempts it): counting, the oldest row and
-- listings share one definition and still get one plan.
CREATE OR REPLACE FUNCTION {schema}.available_rows(p_queue text)
RETURNS SETOF {schema}.ready_entries
LANGUAGE sql STABLE AS $$
    SELECT r.*
    FROM {schema}.queue_claim_heads c
    CROSS JOIN unnest({schema}.ring_live_slots('queue')) AS s(slot)
    JOIN {schema}.ready_entries r
      ON r.ready_slot = s.slot AND r.queue_id = c.queue_id AND r.priority = c.priority
     AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
    WHERE c.queue_id = {schema}.queue_id_of(p_queue)
      AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id
                        AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq)
$$;

-- Per lane of the queue: the enqueue cursor (next lane_seq a producer will reserve, read
-- from the lane's sequence, so it is exact and includes reservations not yet committed),
-- the claim cursor (next lane_seq a claimer will look at), lag = the difference (which
-- counts rollback gaps and in-flight reservations too, as AWA's ADR-025 incident query
-- does), and available = the exact number of committed, unclaimed, not-cancelled rows.
-- Joins on the full lane key; never filters on enqueue_shard < current shard count. The
-- queue ring is locked first, so rows a prune carries meanwhile are counted (see
-- lock_rings_shared below).
CREATE OR REPLACE FUNCTION {schema}.queue_shard_lag(p_queue text)
RETURNS TABLE (priority smallint, enqueue_shard smallint, enqueue_cursor bigint,
               claim_cursor bigint, lag bigint, available bigint)
LANGUAGE plpgsql VOLATILE
SET jit = off AS $$
#variable_conflict use_column
BEGIN
    PERFORM {schema}.lock_rings_shared(ARRAY['queue']);
    RETURN QUERY
    SELECT claims.priority, claims.enqueue_shard,
           coalesce(pg_sequence_last_value(enqueues.seq), 0) + 1 AS enqueue_cursor,
           claims.claim_seq AS claim_cursor,
           coalesce(pg_sequence_last_value(enqueues.seq), 0) + 1 - claims.claim_seq AS lag,
           (SELECT count(*)
            FROM {schema}.ready_entries r
            WHERE r.queue_id = claims.queue_id AND r.priority = claims.priority
              AND r.enqueue_shard = claims.enqueue_shard AND r.lane_seq >= claims.claim_seq
              AND NOT EXISTS (
                  SELECT 1 FROM {schema}.ready_tombstones t
                  WHERE t.ready_slot = r.ready_slot AND t.queue_id = r.queue_id AND t.priority = r.priority
                    AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)) AS available
    FROM {schema}.queue_claim_heads AS claims
    JOIN {schema}.queue_enqueue_heads AS enqueues USING (queue_id, priority, enqueue_shard)
    WHERE claims.queue_id = {schema}.queue_id_of(p_queue)
    ORDER BY claims.priority, claims.enqueue_shard;
END
$$;

-- Readers of the rings, and prune's TRUNCATE. TRUNCATE is not MVCC-safe: a statement whose
-- snapshot was taken before a prune committed, and that reaches the slot's partitions only
-- after it (it queued behind prune's ACCESS EXCLUSIVE locks), sees the slot empty, while
-- what prune wrote in the same transaction (terminal_rollups, minute_rollups, carried
-- rows) is invisible to it: its counts drop for that one statement. A top-level statement
-- is safe, because PostgreSQL locks the tables a statement names while planning it and
-- takes the statement's snapshot after that. A function body is not: it runs with the
-- caller's snapshot and locks its tables only when it reaches them. So each reader below
-- is VOLATILE plpgsql (every statement takes a new snapshot, under READ COMMITTED) and
-- first calls lock_rings_shared: ACCESS SHARE on the rings' parents, which recurses to
-- every partition. A prune that holds its locks makes the call wait until it commits; the
-- reading statement after it then sees the prune whole. A prune that comes later finds a
-- partition locked and backs off (its locks are NOWAIT). Under REPEATABLE READ or
-- SERIALIZABLE the transaction's snapshot predates the lock, so a caller's transaction
-- of those levels can still see a prune half (include/awa/admin.hpp says so).
CREATE OR REPLACE FUNCTION {schema}.lock_rings_shared(p_rings text[])
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_ring   text;
    v_parent text;
BEGIN
    FOREACH v_ring IN ARRAY p_rings LOOP
        FOREACH v_parent IN ARRAY {schema}.ring_parents(v_ring) LOOP
            EXECUTE format('LOCK TABLE %s.%I IN ACCESS SHARE MODE', '{schema}', v_parent);
        END LOOP;
    END LOOP;
END
$$;

-- Exact counts of one queue by state, in the caller's snapshot (one statement), at any
-- shard count and across ring rotations and prunes, provided the caller locked the queue
-- and claim rings before its snapshot was taken (queue_counts_exact, queue_overview):
--   available  committed, unclaimed, not cancelled ready rows (each lane's rows at or after
--              its own cursor, over the live slots);
--   running    open attempts (per claim batch: items minus closed items);
--   scheduled  deferred: scheduled or snoozed;  retryable  deferred: retry backoff or rescue;
--   completed / failed / cancelled  all time: terminal_rollups (pruned slots) plus what the
--              rings still hold (completed: closure rows; failed, cancelled: done rows);
--   dlq        dead letters held now;
--   waiting    jobs waiting for their parents (waiting_jobs).
-- Every part reads live or retained rows only, never history that prune removed.
DROP FUNCTION IF EXISTS {schema}.queue_counts_exact(text);
DROP FUNCTION IF EXISTS {schema}.queue_counts_unlocked(text);
CREATE OR REPLACE FUNCTION {schema}.queue_counts_unlocked(p_queue text)
RETURNS TABLE (available bigint, running bigint, scheduled bigint, retryable bigint,
               completed bigint, failed bigint, cancelled bigint, dlq bigint,
               waiting bigint)
LANGUAGE sql STABLE
SET jit = off AS $$
    WITH done AS (
        SELECT d.state, count(*) AS n
        FROM {schema}.done_entries d
        WHERE d.queue_id = {schema}.queue_id_of(p_queue) AND d.state IN ('completed', 'failed', 'cancelled')
        GROUP BY d.state),
    rolled AS (
        SELECT t.state, t.jobs AS n FROM {schema}.terminal_rollups t
        WHERE t.queue_id = {schema}.queue_id_of(p_queue)),
    deferred AS (
        SELECT count(*) FILTER (WHERE j.reason IN ('scheduled', 'snooze')) AS scheduled,
               count(*) FILTER (WHERE j.reason IN ('retry', 'rescue')) AS retryable
        FROM {schema}.deferred_jobs j
        WHERE j.queue = p_queue),
    batches AS (
        SELECT b.n_items,
               (SELECT coalesce(sum(c.n_closed), 0)
                FROM {schema}.claim_closures c
                WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id) AS closed,
               (SELECT coalesce(sum(c.n_closed), 0)
                FROM {schema}.claim_closures c
                WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                  AND c.outcome = 'completed') AS completed
        FROM {schema}.claim_batches b
        WHERE b.queue_id = {schema}.queue_id_of(p_queue))
    SELECT
        (SELECT count(*) FROM {schema}.available_rows(p_queue)),
        (SELECT coalesce(sum(b.n_items - b.closed), 0)::bigint FROM batches b),
        (SELECT scheduled FROM deferred),
        (SELECT retryable FROM deferred),
        (SELECT coalesce(sum(b.completed), 0)::bigint FROM batches b)
            + coalesce((SELECT n FROM rolled WHERE state = 'completed'), 0)
            + coalesce((SELECT n FROM done WHERE state = 'completed'), 0),
        coalesce((SELECT n FROM rolled WHERE state = 'failed'), 0)
            + coalesce((SELECT n FROM done WHERE state = 'failed'), 0),
        coalesce((SELECT n FROM rolled WHERE state = 'cancelled'), 0)
            + coalesce((SELECT n FROM done WHERE state = 'cancelled'), 0),
        (SELECT count(*) FROM {schema}.dlq_entries d WHERE d.queue = p_queue),
        (SELECT count(*) FROM {schema}.waiting_jobs w WHERE w.queue = p_queue)
$$;

-- queue_counts_unlocked, exact even while a prune commits (see lock_rings_shared).
CREATE OR REPLACE FUNCTION {schema}.queue_counts_exact(p_queue text)
RETURNS TABLE (available bigint, running bigint, scheduled bigint, retryable bigint,
               completed bigint, failed bigint, cancelled bigint, dlq bigint,
               waiting bigint)
LANGUAGE plpgsql VOLATILE
SET jit = off AS $$
BEGIN
    PERFORM {schema}.lock_rings_shared(ARRAY['queue', 'claim']);
    RETURN QUERY SELECT * FROM {schema}.queue_counts_unlocked(p_queue);
END
$$;
