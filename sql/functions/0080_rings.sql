-- Ring rotation and prune (docs/design/rings.md).
--
-- Rings: queue (ready_entries, done_entries, ready_tombstones by ready_slot), claim
-- (claim_batches, claim_closures by claim_slot), lease (leases by lease_slot).
--
-- Rotation appends generation g+1 to ring_rotations: a compare-and-swap on the ledger's
-- primary key, so two rotators can never both advance one generation. It advances only
-- into a slot whose previous generation was pruned, and not at all while the current
-- slot is empty (an idle ring writes nothing).
--
-- Prune truncates the oldest sealed generation's slot. It never waits: the ring's
-- advisory lock is only tried, the slot's partitions are locked NOWAIT (a prune that
-- queued for ACCESS EXCLUSIVE would queue every producer and claimer behind it, see the
-- PRUNE_WAITS variant of models/lock_order.pml), and each gate is checked once before
-- the locks (cheap refusal) and again under them (rows committed while we got there).
-- A slot with live content is refused, unless p_carry: then the live rows are copied
-- forward under the same locks, in the same transaction as the TRUNCATE, so a paused
-- queue or a long-running attempt never pins the ring: the queue ring's into its keep
-- slot (0082_keep_slot.sql), where no later prune reaches them, the claim and lease
-- rings' into the current slot. Failed terminal rows younger than p_failed_retention are
-- always moved to the keep slot with their ready rows. Terminal
-- counts of what is removed are added to terminal_rollups first, and its job ends and
-- claims per lane and minute to minute_rollups (the dashboard's rates).

CREATE OR REPLACE FUNCTION {schema}.ring_parents(p_ring text)
RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_ring
               WHEN 'queue' THEN ARRAY['ready_entries', 'done_entries', 'ready_tombstones']
               WHEN 'claim' THEN ARRAY['claim_batches', 'claim_closures']
               WHEN 'lease' THEN ARRAY['leases']
           END
$$;

-- Rows in one slot of a ring, over all its partitions.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_rows(p_ring text, p_slot integer)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_parent text;
    v_n      bigint;
    v_total  bigint := 0;
BEGIN
    FOREACH v_parent IN ARRAY {schema}.ring_parents(p_ring) LOOP
        EXECUTE format('SELECT count(*) FROM %s.%I', '{schema}', v_parent || '_' || p_slot) INTO v_n;
        v_total := v_total + v_n;
    END LOOP;
    RETURN v_total;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.ring_slot_empty(p_ring text, p_slot integer)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_parent text;
    v_any    boolean;
BEGIN
    FOREACH v_parent IN ARRAY {schema}.ring_parents(p_ring) LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s.%I)', '{schema}', v_parent || '_' || p_slot) INTO v_any;
        IF v_any THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;

-- Records why a rotation or prune did nothing, as of when: it writes only when the reason
-- changes or the action succeeded since the recorded skip, so a ring that stays idle is
-- not rewritten every tick, and skipped_at is when the current run of skips began.
CREATE OR REPLACE FUNCTION {schema}.ring_note_skip(p_ring text, p_action text, p_reason text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {schema}.ring_skips AS s (ring, action, reason) VALUES (p_ring, p_action, p_reason)
    ON CONFLICT (ring, action) DO UPDATE SET reason = EXCLUDED.reason, skipped_at = now()
    WHERE s.reason IS DISTINCT FROM EXCLUDED.reason
       OR s.skipped_at < CASE p_action
                             WHEN 'rotate' THEN (SELECT max(r.rotated_at) FROM {schema}.ring_rotations r
                                                 WHERE r.ring = p_ring)
                             ELSE (SELECT max(p.pruned_at) FROM {schema}.ring_prunes p
                                   WHERE p.ring = p_ring)
                         END
$$;

CREATE OR REPLACE FUNCTION {schema}.ring_check(p_ring text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_ring IS NULL OR p_ring NOT IN ('queue', 'claim', 'lease') THEN
        RAISE EXCEPTION 'unknown ring "%" (expected queue, claim or lease)', p_ring USING ERRCODE = '22023';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.rotate_ring(p_ring text)
RETURNS TABLE (rotated boolean, generation bigint, slot smallint, reason text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_n    integer;
    v_cur  record;
    v_gen  bigint;
    v_slot smallint;
    v_why  text;
BEGIN
    PERFORM {schema}.ring_check(p_ring);
    SELECT s.slot_count INTO v_n FROM {schema}.ring_state s WHERE s.ring = p_ring;
    IF NOT pg_try_advisory_xact_lock(hashtext('{schema}:rings'), hashtext(p_ring)) THEN
        v_why := 'busy: another rotation or prune of this ring is running';
    END IF;
    -- Read under the ring lock, like prune_ring.
    SELECT * INTO v_cur FROM {schema}.ring_current(p_ring);
    IF v_why IS NOT NULL THEN
        NULL;
    ELSIF {schema}.ring_slot_empty(p_ring, v_cur.slot) THEN
        v_why := 'idle: the current slot is empty';
    ELSIF v_cur.generation + 1 - v_n > {schema}.ring_pruned_through(p_ring) THEN
        v_why := format('full: slot %s still holds generation %s: it must be pruned first',
                        (v_cur.generation + 1) % v_n, v_cur.generation + 1 - v_n);
    END IF;
    IF v_why IS NULL THEN
        v_gen := v_cur.generation + 1;
        v_slot := (v_gen % v_n)::smallint;
        INSERT INTO {schema}.ring_rotations (ring, generation, slot) VALUES (p_ring, v_gen, v_slot)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT true, v_gen, v_slot, NULL::text;
            RETURN;
        END IF;
        v_why := 'lost the race: another rotation advanced this generation';
    END IF;
    PERFORM {schema}.ring_note_skip(p_ring, 'rotate', v_why);
    RETURN QUERY SELECT false, v_cur.generation, v_cur.slot, v_why;
END
$$;

-- What is still live in one slot, or NULL when nothing is. Plain MVCC reads, no locks.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_live(p_ring text, p_slot integer)
RETURNS text
LANGUAGE plpgsql STABLE
SET jit = off AS $$
DECLARE
    v_lane record;
    v_n    bigint;
BEGIN
    IF p_ring = 'queue' THEN
        -- Pending: at or after the claim cursor of its OWN lane. The join is on the full
        -- lane key: two shards both have a lane_seq 1 (models/sharded_prune.pml).
        -- The first one found is enough to refuse (a backlog can be large).
        -- One index probe per lane, from its cursor.
        SELECT (SELECT i.queue FROM {schema}.queue_ids i WHERE i.queue_id = c.queue_id) AS queue,
               c.priority, c.enqueue_shard, r.lane_seq INTO v_lane
        FROM {schema}.queue_claim_heads c
        CROSS JOIN LATERAL (
            SELECT r.lane_seq
            FROM {schema}.ready_entries r
            WHERE r.ready_slot = p_slot AND r.queue_id = c.queue_id AND r.priority = c.priority
              AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
              AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                              WHERE t.ready_slot = p_slot AND t.queue_id = r.queue_id
                                AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                                AND t.lane_seq = r.lane_seq)
            ORDER BY r.lane_seq
            LIMIT 1) AS r
        LIMIT 1;
        IF FOUND THEN
            RETURN format('pending ready rows (lane: queue %s priority %s shard %s, lane_seq %s)',
                          v_lane.queue, v_lane.priority, v_lane.enqueue_shard, v_lane.lane_seq);
        END IF;
        SELECT count(*) INTO v_n FROM {schema}.open_attempts() o WHERE o.ready_slot = p_slot;
        IF v_n > 0 THEN
            RETURN format('%s open attempts', v_n);
        END IF;
    ELSIF p_ring = 'claim' THEN
        SELECT count(*) INTO v_n
        FROM {schema}.claim_batches b
        WHERE b.claim_slot = p_slot
          AND b.n_items > coalesce((SELECT sum(c.n_closed) FROM {schema}.claim_closures c
                                    WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id), 0);
        IF v_n > 0 THEN
            RETURN format('%s open receipts (claim batches with attempts still open)', v_n);
        END IF;
    ELSE
        SELECT count(*) INTO v_n FROM {schema}.leases l WHERE l.lease_slot = p_slot;
        IF v_n > 0 THEN
            RETURN format('%s active leases', v_n);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.prune_ring(
    p_ring text,
    p_carry boolean DEFAULT false,
    p_failed_retention interval DEFAULT '72 hours')
RETURNS TABLE (pruned boolean, generation bigint, slot smallint, rows_removed bigint,
               rows_carried bigint, reason text)
LANGUAGE plpgsql
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_n       integer;
    v_cur     record;
    v_gen     bigint;
    v_slot    smallint;
    v_live    text;
    v_why     text;
    v_parent  text;
    v_rows    bigint := 0;
    v_carried bigint := 0;
    v_k       bigint;
    v_try     integer := 0;
    v_locked  boolean := false;
    v_keep_live boolean := false;
BEGIN
    PERFORM {schema}.ring_check(p_ring);
    SELECT s.slot_count INTO v_n FROM {schema}.ring_state s WHERE s.ring = p_ring;
    IF NOT pg_try_advisory_xact_lock(hashtext('{schema}:rings'), hashtext(p_ring)) THEN
        v_why := 'busy: another rotation or prune of this ring is running';
    END IF;
    -- Read under the ring lock (new statements, new snapshots): a prune that held it has
    -- committed its ledger row by now.
    SELECT * INTO v_cur FROM {schema}.ring_current(p_ring);
    v_gen := {schema}.ring_pruned_through(p_ring) + 1;
    v_slot := (v_gen % v_n)::smallint;

    IF v_why IS NOT NULL THEN
        NULL;
    ELSIF v_gen >= v_cur.generation THEN
        v_why := 'nothing sealed: only the current slot holds rows';
    ELSE
        v_live := {schema}.ring_slot_live(p_ring, v_slot);
        IF v_live IS NOT NULL AND NOT p_carry THEN
            v_why := v_live;
        END IF;
    END IF;

    IF v_why IS NULL THEN
        -- All partitions of the slot go together, each locked NOWAIT. A few quick retries
        -- ride out claim and completion statements that hold them for a moment.
        LOOP
            v_try := v_try + 1;
            BEGIN
                FOREACH v_parent IN ARRAY {schema}.ring_parents(p_ring) LOOP
                    EXECUTE format('LOCK TABLE %s.%I IN ACCESS EXCLUSIVE MODE NOWAIT',
                                   '{schema}', v_parent || '_' || v_slot);
                END LOOP;
                v_locked := true;
            EXCEPTION WHEN lock_not_available THEN
                v_locked := false;
            END;
            EXIT WHEN v_locked OR v_try >= 5;
            PERFORM pg_sleep(0.002 * v_try);
        END LOOP;
        IF NOT v_locked THEN
            v_why := 'locked: the slot is in use by running statements; retried later';
        ELSE
            v_live := {schema}.ring_slot_live(p_ring, v_slot);
            IF v_live IS NOT NULL AND NOT p_carry THEN
                v_why := v_live || ' (found on the re-check under the lock)';
            END IF;
        END IF;
    END IF;

    IF v_why IS NOT NULL THEN
        PERFORM {schema}.ring_note_skip(p_ring, 'prune', v_why);
        RETURN QUERY SELECT false, v_gen, v_slot, 0::bigint, 0::bigint, v_why;
        RETURN;
    END IF;

    FOREACH v_parent IN ARRAY {schema}.ring_parents(p_ring) LOOP
        EXECUTE format('SELECT count(*) FROM %s.%I', '{schema}', v_parent || '_' || v_slot) INTO v_k;
        v_rows := v_rows + v_k;
    END LOOP;

    IF p_ring = 'queue' THEN
        v_carried := {schema}.prune_carry_queue(v_slot, p_carry, p_failed_retention);
    ELSIF p_ring = 'claim' THEN
        v_carried := {schema}.prune_carry_claims(v_slot, v_cur.slot, p_carry);
        IF v_carried < 0 THEN
            PERFORM {schema}.ring_note_skip(p_ring, 'prune', 'busy: an open attempt of the slot is being closed');
            RETURN QUERY SELECT false, v_gen, v_slot, 0::bigint, 0::bigint,
                                'busy: an open attempt of the slot is being closed'::text;
            RETURN;
        END IF;
    ELSE
        -- Every lease row of an open attempt moves to the current slot; one whose attempt
        -- is closed is an orphan and goes.
        WITH moved AS (
            INSERT INTO {schema}.leases
                (lease_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease,
                 ready_slot, attempt, state, heartbeat_at, deadline_at, callback_timeout_at,
                 progress, claim_batch, callback_id)
            SELECT v_cur.slot, l.queue_id, l.priority, l.enqueue_shard, l.lane_seq, l.job_id, l.run_lease,
                   l.ready_slot, l.attempt, l.state, l.heartbeat_at, l.deadline_at,
                   l.callback_timeout_at, l.progress, l.claim_batch, l.callback_id
            FROM {schema}.leases l
            WHERE l.lease_slot = v_slot
              AND EXISTS (SELECT 1 FROM {schema}.open_attempts(ARRAY[l.claim_batch]) o
                          WHERE o.lane_seq = l.lane_seq)
            RETURNING 1)
        SELECT count(*) INTO v_carried FROM moved;
    END IF;

    FOREACH v_parent IN ARRAY {schema}.ring_parents(p_ring) LOOP
        EXECUTE format('TRUNCATE %s.%I', '{schema}', v_parent || '_' || v_slot);
    END LOOP;
    -- Whether the keep slot may now hold live work (readers include it only then):
    -- recomputed when this prune may have moved some there or it already might.
    IF p_ring = 'queue' AND (p_carry OR {schema}.ring_keep_live('queue')) THEN
        v_keep_live := {schema}.keep_holds_live();
    END IF;
    INSERT INTO {schema}.ring_prunes (ring, generation, slot, rows_removed, rows_carried, keep_live)
    VALUES (p_ring, v_gen, v_slot, v_rows - v_carried, v_carried, v_keep_live);
    -- The ledgers keep two laps of history (status and debugging need no more).
    DELETE FROM {schema}.ring_rotations r WHERE r.ring = p_ring AND r.generation < v_cur.generation - 2 * v_n;
    DELETE FROM {schema}.ring_prunes r WHERE r.ring = p_ring AND r.generation < v_gen - 2 * v_n;
    RETURN QUERY SELECT true, v_gen, v_slot, v_rows - v_carried, v_carried, NULL::text;
END
$$;

-- The oldest minute minute_rollups keeps: two days back, a day beyond the widest rate
-- window (kMaxRateWindowMinutes), so a window never reaches a minute trimmed away.
-- Prune adds nothing older (a failed job carried for its retention can end up older).
CREATE OR REPLACE FUNCTION {schema}.minute_rollups_from()
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT date_trunc('minute', now()) - interval '2 days'
$$;

-- Deletes minute_rollups rows older than that, called by each prune after its upsert:
-- through the minute index and at most 10,000 rows a call (a prune every few seconds
-- keeps up with any rate at which prunes add rows). SKIP LOCKED: a row another prune's
-- upsert holds is left for a later call, so this delete never waits and the only waits
-- on the table are the upserts', which take their rows in key order (no deadlock).
CREATE OR REPLACE FUNCTION {schema}.minute_rollups_trim()
RETURNS void
LANGUAGE sql AS $$
    DELETE FROM {schema}.minute_rollups r
    WHERE r.minute < {schema}.minute_rollups_from()
      AND r.ctid = ANY (ARRAY(SELECT o.ctid FROM {schema}.minute_rollups o
                            WHERE o.minute < {schema}.minute_rollups_from()
                            ORDER BY o.minute
                            LIMIT 10000
                            FOR UPDATE SKIP LOCKED))
$$;

-- Terminal counts of done rows about to leave a queue-ring slot (p_slot; -1 is the keep
-- slot) for good, into terminal_rollups (all time) and minute_rollups (job ends per lane
-- and minute, for the rates: Admin::throughput, dead letters included). The rows are
-- those of the slot whose key is listed in the temp table awa_fold_keys (p_listed), or
-- not listed (NOT p_listed: the keys are the ones that stay). 'completed' done rows predate
-- migration 0002 or kept a callback's result (0011); any other success leaves only its
-- claim closure (prune_carry_claims).
CREATE OR REPLACE FUNCTION {schema}.fold_done_rows(p_slot smallint, p_listed boolean)
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS awa_fold_keys (
        queue_id integer, priority smallint, enqueue_shard smallint, lane_seq bigint) ON COMMIT DROP;
    -- Two statements per case rather than one with a condition on p_listed: a semi-join
    -- and an anti-join each get a hash plan; a correlated test would probe per row.
    IF p_listed THEN
        INSERT INTO {schema}.terminal_rollups AS t (queue_id, state, jobs)
        SELECT d.queue_id, d.state, count(*)
        FROM {schema}.done_entries d
        WHERE d.ready_slot = p_slot AND d.state IN ('completed', 'failed', 'cancelled')
          AND (d.queue_id, d.priority, d.enqueue_shard, d.lane_seq) IN (
              SELECT k.queue_id, k.priority, k.enqueue_shard, k.lane_seq FROM awa_fold_keys k)
        GROUP BY d.queue_id, d.state
        ORDER BY d.queue_id, d.state
        ON CONFLICT (queue_id, state) DO UPDATE SET jobs = t.jobs + EXCLUDED.jobs;
        INSERT INTO {schema}.minute_rollups AS t (queue_id, priority, enqueue_shard, minute, completed, failed)
        SELECT d.queue_id, d.priority, d.enqueue_shard, date_trunc('minute', d.finished_at),
               count(*) FILTER (WHERE d.state = 'completed'),
               count(*) FILTER (WHERE d.state <> 'completed')
        FROM {schema}.done_entries d
        WHERE d.ready_slot = p_slot AND d.state IN ('completed', 'failed', 'dlq')
          AND d.finished_at >= {schema}.minute_rollups_from()
          AND (d.queue_id, d.priority, d.enqueue_shard, d.lane_seq) IN (
              SELECT k.queue_id, k.priority, k.enqueue_shard, k.lane_seq FROM awa_fold_keys k)
        GROUP BY d.queue_id, date_trunc('minute', d.finished_at), d.priority, d.enqueue_shard
        ORDER BY d.queue_id, date_trunc('minute', d.finished_at), d.priority, d.enqueue_shard
        ON CONFLICT (queue_id, minute, priority, enqueue_shard) DO UPDATE
            SET completed = t.completed + EXCLUDED.completed, failed = t.failed + EXCLUDED.failed;
    ELSE
        INSERT INTO {schema}.terminal_rollups AS t (queue_id, state, jobs)
        SELECT d.queue_id, d.state, count(*)
        FROM {schema}.done_entries d
        WHERE d.ready_slot = p_slot AND d.state IN ('completed', 'failed', 'cancelled')
          AND NOT EXISTS (SELECT 1 FROM awa_fold_keys k
                          WHERE k.queue_id = d.queue_id AND k.priority = d.priority
                            AND k.enqueue_shard = d.enqueue_shard AND k.lane_seq = d.lane_seq)
        GROUP BY d.queue_id, d.state
        ORDER BY d.queue_id, d.state
        ON CONFLICT (queue_id, state) DO UPDATE SET jobs = t.jobs + EXCLUDED.jobs;
        INSERT INTO {schema}.minute_rollups AS t (queue_id, priority, enqueue_shard, minute, completed, failed)
        SELECT d.queue_id, d.priority, d.enqueue_shard, date_trunc('minute', d.finished_at),
               count(*) FILTER (WHERE d.state = 'completed'),
               count(*) FILTER (WHERE d.state <> 'completed')
        FROM {schema}.done_entries d
        WHERE d.ready_slot = p_slot AND d.state IN ('completed', 'failed', 'dlq')
          AND d.finished_at >= {schema}.minute_rollups_from()
          AND NOT EXISTS (SELECT 1 FROM awa_fold_keys k
                          WHERE k.queue_id = d.queue_id AND k.priority = d.priority
                            AND k.enqueue_shard = d.enqueue_shard AND k.lane_seq = d.lane_seq)
        GROUP BY d.queue_id, date_trunc('minute', d.finished_at), d.priority, d.enqueue_shard
        ORDER BY d.queue_id, date_trunc('minute', d.finished_at), d.priority, d.enqueue_shard
        ON CONFLICT (queue_id, minute, priority, enqueue_shard) DO UPDATE
            SET completed = t.completed + EXCLUDED.completed, failed = t.failed + EXCLUDED.failed;
    END IF;
    PERFORM {schema}.minute_rollups_trim();
END
$$;

-- Queue-ring carry and count fold, under prune's locks: what must stay moves to the keep
-- slot (-1) once, never to a slot a later prune reaches. Returns the rows moved.
DROP FUNCTION IF EXISTS {schema}.prune_carry_queue(smallint, smallint, boolean, interval);
CREATE OR REPLACE FUNCTION {schema}.prune_carry_queue(
    p_slot smallint, p_carry boolean, p_failed_retention interval)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n bigint := 0;
    v_k bigint;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS awa_fold_keys (
        queue_id integer, priority smallint, enqueue_shard smallint, lane_seq bigint) ON COMMIT DROP;
    TRUNCATE awa_fold_keys;

    -- Failed jobs stay inspectable (and retryable) for the retention window.
    INSERT INTO awa_fold_keys
    SELECT d.queue_id, d.priority, d.enqueue_shard, d.lane_seq
    FROM {schema}.done_entries d
    WHERE d.ready_slot = p_slot AND d.state = 'failed' AND d.finished_at >= now() - p_failed_retention;
    WITH kept AS (
        INSERT INTO {schema}.done_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt,
             state, finished_at, error, result)
        SELECT -1, d.queue_id, d.priority, d.enqueue_shard, d.lane_seq, d.job_id, d.run_lease,
               d.attempt, d.state, d.finished_at, d.error, d.result
        FROM {schema}.done_entries d
        JOIN awa_fold_keys k USING (queue_id, priority, enqueue_shard, lane_seq)
        WHERE d.ready_slot = p_slot
        RETURNING 1)
    SELECT count(*) INTO v_k FROM kept;
    v_n := v_n + v_k;

    -- Terminal counts of the rows that leave for good (before the live work joins
    -- awa_fold_keys: ready rows moved for it have no done row that stays).
    PERFORM {schema}.fold_done_rows(p_slot, false);

    IF p_carry THEN
        -- Live work: rows not claimed yet (tombstoned ones are dropped with their
        -- tombstones: the claim treats the missing lane_seq as a gap) and the ready rows of
        -- attempts still open. Same lane key and lane_seq, so the claim's merge across
        -- slots (the keep slot included while ring_prunes.keep_live says so) and the
        -- batches' lane ranges still find them.
        INSERT INTO awa_fold_keys
        SELECT r.queue_id, r.priority, r.enqueue_shard, r.lane_seq
        FROM {schema}.ready_entries r
        JOIN {schema}.queue_claim_heads c
          ON c.queue_id = r.queue_id AND c.priority = r.priority AND c.enqueue_shard = r.enqueue_shard
        WHERE r.ready_slot = p_slot AND r.lane_seq >= c.claim_seq
          AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                          WHERE t.ready_slot = p_slot AND t.queue_id = r.queue_id AND t.priority = r.priority
                            AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
        UNION
        SELECT o.queue_id, o.priority, o.enqueue_shard, o.lane_seq
        FROM {schema}.open_attempts() o
        WHERE o.ready_slot = p_slot;
    END IF;

    WITH kept AS (
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
             attempt, run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags,
             errors)
        SELECT -1, r.queue_id, r.priority, r.enqueue_shard, r.lane_seq, r.job_id, r.kind, r.args,
               r.attempt, r.run_lease, r.max_attempts, r.run_at, r.created_at, r.ordering_key,
               r.metadata, r.tags, r.errors
        FROM {schema}.ready_entries r
        WHERE r.ready_slot = p_slot
          AND EXISTS (SELECT 1 FROM awa_fold_keys k
                      WHERE k.queue_id = r.queue_id AND k.priority = r.priority
                        AND k.enqueue_shard = r.enqueue_shard AND k.lane_seq = r.lane_seq)
        RETURNING 1)
    SELECT count(*) INTO v_k FROM kept;
    RETURN v_n + v_k;
END
$$;

-- Claim-ring carry and count fold, under prune's locks. Returns the rows carried, or -1
-- when an open batch's attempt lock is held (a closer or heartbeat is at work on it).
CREATE OR REPLACE FUNCTION {schema}.prune_carry_claims(p_slot smallint, p_into smallint, p_carry boolean)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_open bigint[];
    v_k    bigint;
    v_n    bigint := 0;
BEGIN
    SELECT array_agg(b.batch_id ORDER BY {schema}.attempt_lock_key(b.batch_id)) INTO v_open
    FROM {schema}.claim_batches b
    WHERE b.claim_slot = p_slot
      AND b.n_items > coalesce((SELECT sum(c.n_closed) FROM {schema}.claim_closures c
                                WHERE c.claim_slot = b.claim_slot AND c.batch_id = b.batch_id), 0);
    v_open := coalesce(v_open, '{}');
    IF cardinality(v_open) > 0 AND NOT p_carry THEN
        RAISE EXCEPTION 'prune_carry_claims: open batches without carry' USING ERRCODE = 'XX000';
    END IF;
    -- Closers hold a batch's lock from before they read it until they commit: moving a
    -- batch under one would strand its closure in the truncated slot.
    IF EXISTS (SELECT 1 FROM unnest(v_open) b
               WHERE NOT pg_try_advisory_xact_lock(hashtext('{schema}:attempts'), {schema}.attempt_lock_key(b))) THEN
        RETURN -1;
    END IF;

    INSERT INTO {schema}.terminal_rollups AS t (queue_id, state, jobs)
    SELECT b.queue_id, 'completed', sum(c.n_closed)
    FROM {schema}.claim_closures c
    JOIN {schema}.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
    WHERE c.claim_slot = p_slot AND c.outcome = 'completed' AND b.batch_id <> ALL (v_open)
    GROUP BY b.queue_id
    ORDER BY b.queue_id
    ON CONFLICT (queue_id, state) DO UPDATE SET jobs = t.jobs + EXCLUDED.jobs;

    -- The same batches' claims (minute of claimed_at) and successes (minute of closed_at)
    -- per lane, for the rates (Admin::shard_claims, Admin::throughput). One statement, so
    -- its row locks are taken in key order like every other writer's.
    INSERT INTO {schema}.minute_rollups AS t (queue_id, priority, enqueue_shard, minute, completed, claims)
    SELECT e.queue_id, e.priority, e.enqueue_shard, e.minute, sum(e.completed), sum(e.claims)
    FROM (
        SELECT b.queue_id, b.priority, b.enqueue_shard, date_trunc('minute', b.claimed_at) AS minute,
               0::bigint AS completed, b.n_items::bigint AS claims
        FROM {schema}.claim_batches b
        WHERE b.claim_slot = p_slot AND b.batch_id <> ALL (v_open)
        UNION ALL
        SELECT b.queue_id, b.priority, b.enqueue_shard, date_trunc('minute', c.closed_at),
               c.n_closed::bigint, 0::bigint
        FROM {schema}.claim_closures c
        JOIN {schema}.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
        WHERE c.claim_slot = p_slot AND c.outcome = 'completed' AND b.batch_id <> ALL (v_open)) e
    WHERE e.minute >= {schema}.minute_rollups_from()
    GROUP BY e.queue_id, e.minute, e.priority, e.enqueue_shard
    ORDER BY e.queue_id, e.minute, e.priority, e.enqueue_shard
    ON CONFLICT (queue_id, minute, priority, enqueue_shard) DO UPDATE
        SET completed = t.completed + EXCLUDED.completed, claims = t.claims + EXCLUDED.claims;
    PERFORM {schema}.minute_rollups_trim();

    WITH kept AS (
        INSERT INTO {schema}.claim_batches
            (claim_slot, batch_id, queue_id, priority, enqueue_shard, first_seq, last_seq, n_items,
             claimed_at, deadline_at)
        SELECT p_into, b.batch_id, b.queue_id, b.priority, b.enqueue_shard, b.first_seq, b.last_seq,
               b.n_items, b.claimed_at, b.deadline_at
        FROM {schema}.claim_batches b
        WHERE b.claim_slot = p_slot AND b.batch_id = ANY (v_open)
        RETURNING 1)
    SELECT count(*) INTO v_k FROM kept;
    v_n := v_k;
    WITH kept AS (
        INSERT INTO {schema}.claim_closures (claim_slot, batch_id, outcome, lane_seqs, n_closed, closed_at)
        SELECT p_into, c.batch_id, c.outcome, c.lane_seqs, c.n_closed, c.closed_at
        FROM {schema}.claim_closures c
        WHERE c.claim_slot = p_slot AND c.batch_id = ANY (v_open)
        RETURNING 1)
    SELECT count(*) INTO v_k FROM kept;
    RETURN v_n + v_k;
END
$$;

-- Per ring: its slots with state (current / sealed / pruned) and exact row counts, and
-- for the queue ring its keep slot (slot -1, state 'keep'; 0082_keep_slot.sql). Row
-- counts read every partition: an operator path.
CREATE OR REPLACE FUNCTION {schema}.storage_status()
RETURNS TABLE (ring text, slot smallint, state text, generation bigint, row_count bigint,
               current_slot smallint, current_generation bigint)
LANGUAGE plpgsql STABLE
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_ring text;
    v_n    integer;
    v_cur  record;
    v_done bigint;
    v_i    integer;
    v_gen  bigint;
BEGIN
    FOREACH v_ring IN ARRAY ARRAY['queue', 'claim', 'lease'] LOOP
        SELECT s.slot_count INTO v_n FROM {schema}.ring_state s WHERE s.ring = v_ring;
        SELECT * INTO v_cur FROM {schema}.ring_current(v_ring);
        v_done := {schema}.ring_pruned_through(v_ring);
        FOR v_i IN 0 .. v_n - 1 LOOP
            -- the newest generation that used (or uses) this slot
            v_gen := v_cur.generation - ((v_cur.slot - v_i + v_n) % v_n);
            RETURN QUERY SELECT v_ring, v_i::smallint,
                CASE WHEN v_i = v_cur.slot THEN 'current'
                     WHEN v_gen < 0 OR v_gen <= v_done THEN 'pruned'
                     ELSE 'sealed' END,
                greatest(v_gen, -1), {schema}.ring_slot_rows(v_ring, v_i),
                v_cur.slot, v_cur.generation;
        END LOOP;
        IF v_ring = 'queue' THEN
            RETURN QUERY SELECT v_ring, (-1)::smallint, 'keep'::text, (-1)::bigint,
                (SELECT count(*) FROM {schema}.ready_entries r WHERE r.ready_slot = -1)
                + (SELECT count(*) FROM {schema}.done_entries d WHERE d.ready_slot = -1)
                + (SELECT count(*) FROM {schema}.ready_tombstones t WHERE t.ready_slot = -1),
                v_cur.slot, v_cur.generation;
        END IF;
    END LOOP;
END
$$;
