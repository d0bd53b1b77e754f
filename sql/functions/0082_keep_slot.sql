-- The queue ring's keep slot (migration 0017, docs/design/rings.md "The keep slot").
--
-- ready_slot = -1 is a partition of ready_entries, done_entries and ready_tombstones that
-- no rotation reaches. A prune moves there what must outlive the slot it prunes: failed
-- jobs inside their retention (done row and ready row) and, when it carries, unclaimed
-- rows and the ready rows of open attempts. Each such row is written there once, however
-- many laps it stays; the sweep below deletes it once it is dead. Rows that arrive later
-- by key — a completion's done row, a cancel's tombstone — follow their ready row there.
--
-- Readers: the keep slot is one of the live slots (ring_live_slots, the claim) only while
-- it may hold live work, as the newest prune recorded (ring_prunes.keep_live). Only a
-- prune moves live work in, so a reader that read the ring position before that prune
-- fails the claim's position guard; the sweep may clear the flag once the slot holds no
-- live work, which never hides a row from a reader that still needs it.

-- Whether the keep slot holds live work: an unclaimed row (at or after its own lane's
-- claim cursor; tombstoned ones count too, harmlessly), or a ready row inside the lane
-- range of a claim batch that still has open attempts. Over-approximates; never misses.
CREATE OR REPLACE FUNCTION {schema}.keep_holds_live()
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1
                   FROM {schema}.queue_claim_heads c
                   CROSS JOIN LATERAL (
                       SELECT 1
                       FROM {schema}.ready_entries r
                       WHERE r.ready_slot = -1 AND r.queue_id = c.queue_id AND r.priority = c.priority
                         AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
                       LIMIT 1) AS pending)
        OR EXISTS (SELECT 1
                   FROM {schema}.claim_batches b
                   WHERE b.n_items > coalesce((SELECT sum(c.n_closed) FROM {schema}.claim_closures c
                                               WHERE c.claim_slot = b.claim_slot
                                                 AND c.batch_id = b.batch_id), 0)
                     AND EXISTS (SELECT 1 FROM {schema}.ready_entries r
                                 WHERE r.ready_slot = -1 AND r.queue_id = b.queue_id
                                   AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
                                   AND r.lane_seq BETWEEN b.first_seq AND b.last_seq))
$$;

-- Deletes dead rows from the keep slot, at most p_limit ready rows (with their done rows
-- and tombstones) a call, and returns the rows deleted. A ready row is dead once its lane's
-- claim cursor has passed it, no open attempt runs on it, and it is not a failed job
-- younger than p_failed_retention. Terminal counts of what goes are folded into
-- terminal_rollups and minute_rollups first, in the same transaction, as prune does. When
-- nothing in the slot is to be kept, the three partitions are truncated instead (locked
-- NOWAIT, a few quick tries, like prune). Runs under the queue ring's advisory lock, tried
-- only (0: busy), so it never interleaves with a prune of the queue ring. Clears
-- ring_prunes.keep_live when the slot holds no live work.
CREATE OR REPLACE FUNCTION {schema}.sweep_keep(
    p_failed_retention interval DEFAULT '72 hours', p_limit integer DEFAULT 100000)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n      bigint := 0;
    v_k      bigint;
    v_keep   boolean;
    v_try    integer := 0;
    v_locked boolean := false;
    v_parent text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'sweep_keep: limit must be at least 1' USING ERRCODE = '22023';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('{schema}:rings'), hashtext('queue')) THEN
        RETURN 0;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {schema}.ready_entries r WHERE r.ready_slot = -1)
       AND NOT EXISTS (SELECT 1 FROM {schema}.done_entries d WHERE d.ready_slot = -1) THEN
        RETURN 0;
    END IF;

    v_keep := {schema}.keep_holds_live()
              OR EXISTS (SELECT 1 FROM {schema}.done_entries d
                         WHERE d.ready_slot = -1 AND d.state = 'failed'
                           AND d.finished_at >= now() - p_failed_retention);
    IF NOT v_keep THEN
        -- Everything in the slot is dead: fold it all and truncate, if the partitions can
        -- be had without waiting (claims and completions hold them for moments).
        LOOP
            v_try := v_try + 1;
            BEGIN
                FOREACH v_parent IN ARRAY {schema}.ring_parents('queue') LOOP
                    EXECUTE format('LOCK TABLE %s.%I IN ACCESS EXCLUSIVE MODE NOWAIT',
                                   '{schema}', v_parent || '_keep');
                END LOOP;
                v_locked := true;
            EXCEPTION WHEN lock_not_available THEN
                v_locked := false;
            END;
            EXIT WHEN v_locked OR v_try >= 5;
            PERFORM pg_sleep(0.002 * v_try);
        END LOOP;
        -- Re-checked under the locks: a completion may have failed a job meanwhile.
        IF v_locked AND NOT {schema}.keep_holds_live()
           AND NOT EXISTS (SELECT 1 FROM {schema}.done_entries d
                           WHERE d.ready_slot = -1 AND d.state = 'failed'
                             AND d.finished_at >= now() - p_failed_retention) THEN
            CREATE TEMP TABLE IF NOT EXISTS awa_fold_keys (
                queue_id integer, priority smallint, enqueue_shard smallint, lane_seq bigint) ON COMMIT DROP;
            TRUNCATE awa_fold_keys;
            PERFORM {schema}.fold_done_rows(-1::smallint, false);
            SELECT count(*) INTO v_k FROM {schema}.ready_entries r WHERE r.ready_slot = -1;
            v_n := v_k;
            SELECT count(*) INTO v_k FROM {schema}.done_entries d WHERE d.ready_slot = -1;
            v_n := v_n + v_k;
            SELECT count(*) INTO v_k FROM {schema}.ready_tombstones t WHERE t.ready_slot = -1;
            v_n := v_n + v_k;
            FOREACH v_parent IN ARRAY {schema}.ring_parents('queue') LOOP
                EXECUTE format('TRUNCATE %s.%I', '{schema}', v_parent || '_keep');
            END LOOP;
            PERFORM {schema}.keep_live_cleared();
            RETURN v_n;
        END IF;
    END IF;

    -- Row by row: the dead ready rows, up to the limit.
    CREATE TEMP TABLE IF NOT EXISTS awa_fold_keys (
        queue_id integer, priority smallint, enqueue_shard smallint, lane_seq bigint) ON COMMIT DROP;
    TRUNCATE awa_fold_keys;
    INSERT INTO awa_fold_keys
    WITH open_in_keep AS MATERIALIZED (
        -- Attempts still open whose ready row is in the keep slot.
        SELECT r.queue_id, r.priority, r.enqueue_shard, r.lane_seq
        FROM {schema}.claim_batches b
        JOIN {schema}.ready_entries r
          ON r.ready_slot = -1 AND r.queue_id = b.queue_id AND r.priority = b.priority
         AND r.enqueue_shard = b.enqueue_shard AND r.lane_seq BETWEEN b.first_seq AND b.last_seq
        WHERE b.n_items > coalesce((SELECT sum(c.n_closed) FROM {schema}.claim_closures c
                                    WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id), 0)
          AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                          WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id
                            AND c.lane_seqs @> r.lane_seq))
    SELECT r.queue_id, r.priority, r.enqueue_shard, r.lane_seq
    FROM {schema}.ready_entries r
    JOIN {schema}.queue_claim_heads c
      ON c.queue_id = r.queue_id AND c.priority = r.priority AND c.enqueue_shard = r.enqueue_shard
    WHERE r.ready_slot = -1 AND r.lane_seq < c.claim_seq
      AND NOT EXISTS (SELECT 1 FROM open_in_keep o
                      WHERE o.queue_id = r.queue_id AND o.priority = r.priority
                        AND o.enqueue_shard = r.enqueue_shard AND o.lane_seq = r.lane_seq)
      AND NOT EXISTS (SELECT 1 FROM {schema}.done_entries d
                      WHERE d.ready_slot = -1 AND d.queue_id = r.queue_id AND d.priority = r.priority
                        AND d.enqueue_shard = r.enqueue_shard AND d.lane_seq = r.lane_seq
                        AND d.state = 'failed' AND d.finished_at >= now() - p_failed_retention)
    LIMIT p_limit;

    PERFORM {schema}.fold_done_rows(-1::smallint, true);
    WITH gone AS (
        DELETE FROM {schema}.done_entries d
        USING awa_fold_keys k
        WHERE d.ready_slot = -1 AND d.queue_id = k.queue_id AND d.priority = k.priority
          AND d.enqueue_shard = k.enqueue_shard AND d.lane_seq = k.lane_seq
        RETURNING 1)
    SELECT count(*) INTO v_k FROM gone;
    v_n := v_n + v_k;
    WITH gone AS (
        DELETE FROM {schema}.ready_tombstones t
        USING awa_fold_keys k
        WHERE t.ready_slot = -1 AND t.queue_id = k.queue_id AND t.priority = k.priority
          AND t.enqueue_shard = k.enqueue_shard AND t.lane_seq = k.lane_seq
        RETURNING 1)
    SELECT count(*) INTO v_k FROM gone;
    v_n := v_n + v_k;
    WITH gone AS (
        DELETE FROM {schema}.ready_entries r
        USING awa_fold_keys k
        WHERE r.ready_slot = -1 AND r.queue_id = k.queue_id AND r.priority = k.priority
          AND r.enqueue_shard = k.enqueue_shard AND r.lane_seq = k.lane_seq
        RETURNING 1)
    SELECT count(*) INTO v_k FROM gone;
    v_n := v_n + v_k;

    IF {schema}.ring_keep_live('queue') AND NOT {schema}.keep_holds_live() THEN
        PERFORM {schema}.keep_live_cleared();
    END IF;
    RETURN v_n;
END
$$;

-- The keep slot holds no live work any more: say so on the newest prune's ledger row, so
-- readers stop including it. Called under the queue ring's advisory lock.
CREATE OR REPLACE FUNCTION {schema}.keep_live_cleared()
RETURNS void
LANGUAGE sql AS $$
    UPDATE {schema}.ring_prunes p SET keep_live = false
    WHERE p.ring = 'queue' AND p.keep_live
      AND p.generation = (SELECT max(q.generation) FROM {schema}.ring_prunes q WHERE q.ring = 'queue')
$$;
