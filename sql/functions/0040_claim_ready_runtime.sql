-- The claim (docs/design/engine.md, "The claim"; docs/design/rings.md for the slots).
--
-- 1. Candidates: every claim head of the queue, joined to its enqueue head on the full
--    lane key (queue, priority, enqueue_shard), that has a committed unclaimed row at or
--    after its cursor. Ordered by effective priority, then the lane head's run_at, then
--    the lane priority. No predicate on enqueue_shard < current shard count: after the
--    count is lowered, the out-of-range shards keep draining.
-- 2. Lock one: FOR UPDATE OF claims SKIP LOCKED, so concurrent claimers spread over
--    shards instead of queueing behind one head.
-- 3. Drain up to p_max_batch rows of that lane in lane_seq order, with a fresh snapshot
--    taken after the lock. Every row the snapshot shows is committed; because producers
--    hold the lane lock to commit, a visible row N+k proves every lane_seq below it final,
--    so the cursor may jump over gaps (rolled-back ranges) between visible rows. With no
--    visible row at the cursor (an uncommitted reservation at the head) the lane yields
--    nothing now. Tombstoned (cancelled) rows are skipped but passed by the cursor.
-- 4. Write one claim_batches row (the receipt of the whole claim: lane range and item
--    count, shard carried) and move the cursor, in the caller's transaction: a
--    rolled-back claim hands the same rows out again, and a crash after commit leaves
--    nothing to repair.
--
-- Rows of one lane may sit in several live ready slots (the ring rotated while they
-- waited, or prune moved them to the keep slot, -1, when they outlived a lap of the ring),
-- not necessarily in slot order. The keep slot is live only while a prune has left live
-- work in it (ring_prunes.keep_live, read with the ring position). The candidate
-- scan therefore reads each live slot with the slot as a plain scalar (lane_heads_in_slot,
-- one UNION ALL arm per possible live slot, an arm with a NULL slot doing nothing) —
-- PostgreSQL prunes that to one partition at executor start-up and walks the primary key
-- in lane_seq order — and takes each lane's smallest head over the slots (with one live
-- slot, the usual case, the scan reads that slot alone: see the branch). The drain then reads the lane
-- range [lo, lo + max_batch - 1] from every live slot at once, lo being the lane's visible
-- head (or the cursor, if a claimer moved it past that head meanwhile): a range, not
-- "ORDER BY lane_seq LIMIT n" over "ready_slot = ANY(slots)", which PostgreSQL neither
-- prunes nor orders by the index and so would read and sort the lane's whole backlog.
-- Rows of the range below lo are gaps (a visible head proves every lane_seq below it
-- final), and gaps inside the range only make the claim smaller.
--
-- After a change of enqueue_shards, keyed jobs of one key may sit on two shards; until the
-- rows enqueued before the change are claimed, each lane is capped at its fence and the
-- rows after the change wait (0022_shard_fences.sql). Each statement that picks rows reads
-- the caps in its own snapshot; for an unfenced queue that is one probe of queue_meta's
-- primary key per statement (evaluated once, before the rows).
--
-- Effective priority = max(1, priority - floor(wait / aging)), wait measured from the
-- row's run_at; the lane priority stays in every key and is returned beside it.
-- aging and deadline default to the queue's queue_meta settings (priority_aging_ms,
-- deadline_ms) when the caller passes NULL; a paused queue claims nothing.
--
-- Limits (migration 0009, docs/scheduling.md "Rate limits and concurrency"), read with the
-- other settings in the same primary-key probe; a queue with none set runs no statement
-- more than before.
--   global_max_workers: a transaction-scoped advisory lock per queue serialises the
--     queue's claimers up to their commit; in a NEW statement (READ COMMITTED: its
--     snapshot is taken after the lock, so it shows every earlier holder's committed
--     claim) count the queue's open attempts — claim batch items minus closed items, the
--     definition close_attempts writes — and claim at most the limit minus that. Counted,
--     not kept in a counter: completion, release, rescue and cancel change nothing here,
--     and nothing can drift.
--   max_rate / burst: a token bucket row per queue, locked and refilled for the time
--     elapsed (clock_timestamp, after the lock), caps the claim at floor(tokens); what was
--     actually claimed is taken out after the claim, so an empty claim costs nothing.
--
-- "-- optional(feature) {" ... "-- optional }" mark the code of optional features; a
-- benchmark run with AWA_BENCH_FEATURES=off installs this file without them (and with the
-- "--off" lines in their place) to measure what plain jobs pay for them
-- (src/schema/optional_features.hpp).
-- Each lane's first row at or after its claim cursor in one ready slot (none for a NULL
-- slot). A SQL function so that PostgreSQL inlines it: called with a scalar slot it is
-- pruned to one partition at executor start-up and walks the primary key in lane_seq
-- order.
CREATE OR REPLACE FUNCTION {schema}.lane_heads_in_slot(p_queue_id integer, p_slot smallint)
RETURNS TABLE (priority smallint, enqueue_shard smallint, seq bigint, at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT claims.priority, claims.enqueue_shard, head.lane_seq, head.run_at
    FROM {schema}.queue_claim_heads AS claims
    CROSS JOIN LATERAL (
        SELECT r.lane_seq, r.run_at
        FROM {schema}.ready_entries r
        WHERE r.ready_slot = p_slot
          AND r.queue_id = claims.queue_id
          AND r.priority = claims.priority
          AND r.enqueue_shard = claims.enqueue_shard
          AND r.lane_seq >= claims.claim_seq
        ORDER BY r.lane_seq
        LIMIT 1) AS head
    WHERE claims.queue_id = p_queue_id AND p_slot IS NOT NULL
$$;

-- A row's effective priority (see above): its lane priority aged by the seconds it has
-- waited since run_at, one level per p_aging_s, never above 1; p_aging_s NULL: no aging.
-- Inlined like lane_heads_in_slot, so the candidate scans and the drain share one rule.
CREATE OR REPLACE FUNCTION {schema}.effective_priority(p_priority smallint, p_at timestamptz,
                                                        p_aging_s double precision)
RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_aging_s IS NULL THEN p_priority
                ELSE greatest(1, p_priority - floor(extract(epoch FROM now() - p_at) / p_aging_s))
           END
$$;

DROP FUNCTION IF EXISTS {schema}.claim_ready_runtime(text, integer, interval, interval);
CREATE FUNCTION {schema}.claim_ready_runtime(
    p_queue text,
    p_max_batch integer,
    p_deadline interval DEFAULT NULL,
    p_aging interval DEFAULT NULL)
RETURNS TABLE (
    job_id bigint, run_lease bigint, attempt smallint, enqueue_shard smallint,
    ready_slot smallint, lane_seq bigint, claim_slot smallint, claim_batch bigint,
    queue text, priority smallint, effective_priority smallint, kind text, args jsonb,
    metadata jsonb, tags text[], max_attempts smallint, ordering_key bytea, errors jsonb,
    run_at timestamptz, created_at timestamptz, claimed_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql
-- Generic plans: the statements over all seventeen possible live slots are pruned at
-- executor start-up; planned per call (custom plans) they cost milliseconds.
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_gen        bigint;
    v_pruned     bigint;
    v_slots      smallint[];
    v_claim_slot smallint;
    v_aging_s    double precision;
    v_priority   smallint;
    v_shard      smallint;
    v_cursor     bigint;
    v_rows       bigint;
    v_tries      integer := 0;
    v_lo         bigint;
    v_paused     boolean;
    v_meta_aging_ms    bigint;
    v_meta_deadline_ms bigint;
    v_deadline   interval;
    v_max_rate   double precision;
    v_burst      integer;
    v_global_max integer;
    v_max_batch  integer := p_max_batch;
    v_tokens     double precision;
    v_open       bigint;
    v_claimed    bigint := 0;
    v_fence      bigint;
    v_hi         bigint;
    v_qid        integer;
BEGIN
    IF p_max_batch IS NULL OR p_max_batch < 1 THEN
        RAISE EXCEPTION 'claim_ready_runtime: max_batch must be at least 1' USING ERRCODE = '22023';
    END IF;
    -- The queue's settings, in one primary-key probe: a paused queue claims nothing; the
    -- worker's aging and deadline win, the queue's apply when the worker passes none. A
    -- deadline is capped at 100 years so that now() + it stays a valid timestamp.
    SELECT m.paused, m.priority_aging_ms, m.deadline_ms, m.max_rate, m.burst, m.global_max_workers,
           m.shard_fence
    INTO v_paused, v_meta_aging_ms, v_meta_deadline_ms, v_max_rate, v_burst, v_global_max,
         v_fence
    FROM {schema}.queue_meta m
    WHERE m.queue = p_queue;
    IF v_paused THEN
        RETURN;
    END IF;
    v_qid := {schema}.queue_id_of(p_queue);
    IF v_qid IS NULL THEN
        RETURN;  -- no lane yet: nothing to claim
    END IF;
    -- A change of enqueue_shards not yet drained (0022_shard_fences.sql): lift what has
    -- drained. The caps themselves are read by each statement below in its own snapshot
    -- (one that sees a row enqueued after a change sees that change's fence).
    IF v_fence IS NOT NULL THEN
        PERFORM {schema}.shard_fence_now(p_queue, v_fence);
    END IF;

    -- optional(limits) {
    IF v_global_max IS NOT NULL THEN
        -- A snapshot older than the lock (REPEATABLE READ, SERIALIZABLE) would miss the
        -- previous holder's claim and let the queue exceed its limit.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'claim_ready_runtime: queue % has a global concurrency limit; claim it in a READ COMMITTED transaction',
                p_queue USING ERRCODE = '0A000';
        END IF;
        PERFORM pg_advisory_xact_lock(hashtext('{schema}:queue_limit'), hashtext(p_queue));
        SELECT coalesce(sum(b.n_items - coalesce((SELECT sum(c.n_closed)
                                                  FROM {schema}.claim_closures c
                                                  WHERE c.claim_slot = b.claim_slot
                                                    AND c.batch_id = b.batch_id), 0)), 0)
        INTO v_open
        FROM {schema}.claim_batches b
        WHERE b.queue_id = v_qid;
        IF v_open >= v_global_max THEN
            RETURN;
        END IF;
        v_max_batch := least(v_max_batch, v_global_max - v_open);
    END IF;
    IF v_max_rate IS NOT NULL THEN
        v_burst := coalesce(v_burst, greatest(1, ceil(v_max_rate))::integer);
        -- Created full; refilled for the time since the last claimer's refill, read after
        -- the row lock is granted (a claimer that waited for it is not paid for the wait
        -- twice: refilled_at only moves forward).
        INSERT INTO {schema}.queue_rate_buckets AS k (queue, tokens, refilled_at)
        VALUES (p_queue, v_burst, clock_timestamp())
        ON CONFLICT (queue) DO UPDATE SET
            tokens = least(v_burst::double precision,
                           k.tokens + v_max_rate * greatest(0, extract(epoch FROM clock_timestamp() - k.refilled_at))),
            refilled_at = greatest(k.refilled_at, clock_timestamp())
        RETURNING k.tokens INTO v_tokens;
        IF v_tokens < 1 THEN
            RETURN;
        END IF;
        v_max_batch := least(v_max_batch, floor(v_tokens)::integer);
    END IF;
    -- optional }

    -- optional(aging, deadline) {
    v_aging_s := coalesce(extract(epoch FROM p_aging)::double precision,
                          v_meta_aging_ms / 1000.0);
    IF v_aging_s IS NOT NULL AND v_aging_s <= 0 THEN
        v_aging_s := NULL;
    END IF;
    v_deadline := p_deadline;
    IF v_deadline IS NULL AND v_meta_deadline_ms IS NOT NULL THEN
        v_deadline := make_interval(secs => least(v_meta_deadline_ms, 3155760000000) / 1000.0);
    END IF;
    -- optional }
    v_claim_slot := {schema}.ring_current_slot('claim');

    -- A lane whose visible head turns out to be only tombstones, or that another claimer
    -- drained between our candidate scan and our lock, yields nothing: try the next one.
    -- Bounded: each pass either returns rows or moves a cursor / skips a drained lane.
    LOOP
        v_tries := v_tries + 1;
        -- ring_position('queue') and ring_live_slots('queue'), inline and in one statement:
        -- this runs on every claim.
        SELECT g.gen, g.pruned,
               CASE WHEN g.keep THEN ARRAY[-1]::smallint[] ELSE '{}' END
               || ARRAY(SELECT (x % g.n)::smallint
                        FROM generate_series(greatest(g.pruned + 1, g.gen - g.n + 1), g.gen) AS x
                        ORDER BY x)
        INTO v_gen, v_pruned, v_slots
        FROM (SELECT (SELECT r.generation FROM {schema}.ring_rotations r
                      WHERE r.ring = 'queue' ORDER BY r.generation DESC LIMIT 1) AS gen,
                     coalesce(last_prune.generation, -1) AS pruned,
                     coalesce(last_prune.keep_live, false) AS keep,
                     (SELECT s.slot_count FROM {schema}.ring_state s WHERE s.ring = 'queue') AS n
              FROM (SELECT NULL) AS one
              LEFT JOIN LATERAL (SELECT p.generation, p.keep_live FROM {schema}.ring_prunes p
                                 WHERE p.ring = 'queue' ORDER BY p.generation DESC LIMIT 1) AS last_prune
                ON true) AS g;
        IF cardinality(v_slots) > 17 THEN
            RAISE EXCEPTION 'claim_ready_runtime reads at most 17 live ready slots (16 and the keep slot), the ring has %',
                cardinality(v_slots) USING ERRCODE = '0A000';
        END IF;
        IF cardinality(v_slots) = 1 THEN
            -- One live slot, the usual case (the ring has not rotated since the last
            -- prune): the same scan over that slot alone. Each arm of the general scan is
            -- pruned at executor start-up, but a generic plan still carries and initialises
            -- all seventeen. This form makes a claim about a quarter cheaper (medians of 3
            -- pgbench runs of BEGIN, claim, ROLLBACK: empty 0.85 -> 0.62 ms, one row
            -- 1.33 -> 0.96 ms), a fixed cost that idle pickup pays.
            SELECT claims.priority, claims.enqueue_shard, head.seq
            INTO v_priority, v_shard, v_lo
            FROM {schema}.queue_claim_heads AS claims
            JOIN {schema}.queue_enqueue_heads AS enqueues USING (queue_id, priority, enqueue_shard)
            JOIN {schema}.lane_heads_in_slot(v_qid, v_slots[1]) AS head
              ON head.priority = claims.priority AND head.enqueue_shard = claims.enqueue_shard
            WHERE claims.queue_id = v_qid
              AND (NOT EXISTS (SELECT 1 FROM {schema}.queue_meta m WHERE m.queue = p_queue AND m.shard_fence IS NOT NULL)
                   OR head.seq < {schema}.shard_fence_cap(v_qid, claims.priority, claims.enqueue_shard))
            -- The ORDER BY of the general scan below: keep the two the same.
            -- optional(aging) {
            ORDER BY {schema}.effective_priority(claims.priority, head.at, v_aging_s),
            --off ORDER BY claims.priority,
            -- optional }
                     head.at,
                     claims.priority
            LIMIT 1
            FOR UPDATE OF claims SKIP LOCKED;
        ELSE
            SELECT claims.priority, claims.enqueue_shard, head.seq
            INTO v_priority, v_shard, v_lo
            FROM {schema}.queue_claim_heads AS claims
            JOIN {schema}.queue_enqueue_heads AS enqueues USING (queue_id, priority, enqueue_shard)
            JOIN (SELECT DISTINCT ON (h.p, h.s) h.p, h.s, h.seq, h.at
                  FROM (SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[1])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[2])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[3])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[4])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[5])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[6])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[7])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[8])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[9])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[10])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[11])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[12])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[13])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[14])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[15])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[16])
                        UNION ALL SELECT * FROM {schema}.lane_heads_in_slot(v_qid, v_slots[17])) AS h(p, s, seq, at)
                  ORDER BY h.p, h.s, h.seq) AS head
              ON head.p = claims.priority AND head.s = claims.enqueue_shard
            WHERE claims.queue_id = v_qid
              AND (NOT EXISTS (SELECT 1 FROM {schema}.queue_meta m WHERE m.queue = p_queue AND m.shard_fence IS NOT NULL)
                   OR head.seq < {schema}.shard_fence_cap(v_qid, claims.priority, claims.enqueue_shard))
            -- optional(aging) {
            ORDER BY {schema}.effective_priority(claims.priority, head.at, v_aging_s),
            --off ORDER BY claims.priority,
            -- optional }
                     head.at,
                     claims.priority
            LIMIT 1
            FOR UPDATE OF claims SKIP LOCKED;
        END IF;

        IF NOT FOUND THEN
            EXIT;
        END IF;

        -- Re-read the cursor under the lock: a claimer that committed after our candidate
        -- scan may have moved it.
        SELECT c.claim_seq INTO v_cursor
        FROM {schema}.queue_claim_heads c
        WHERE c.queue_id = v_qid AND c.priority = v_priority AND c.enqueue_shard = v_shard;

        v_lo := greatest(v_lo, v_cursor);
        v_hi := v_lo + v_max_batch - 1;

        -- The guard: the ring position seen by this statement — whose snapshot is taken
        -- after it has locked the partitions it reads, so no prune can truncate them under
        -- it — must be the one the candidate scan read the live slots of. A prune in between may have carried
        -- rows of this lane into a slot we did not look at; then claim nothing and look
        -- again, rather than move the cursor past rows we never saw.
        RETURN QUERY
        WITH picked AS MATERIALIZED (
            SELECT r.*
            FROM {schema}.ready_entries r
            WHERE (SELECT r.generation FROM {schema}.ring_rotations r
                   WHERE r.ring = 'queue' ORDER BY r.generation DESC LIMIT 1) = v_gen
              AND coalesce((SELECT p.generation FROM {schema}.ring_prunes p
                            WHERE p.ring = 'queue' ORDER BY p.generation DESC LIMIT 1), -1) = v_pruned
              AND r.ready_slot IN (v_slots[1], v_slots[2], v_slots[3], v_slots[4], v_slots[5], v_slots[6], v_slots[7], v_slots[8],
                                   v_slots[9], v_slots[10], v_slots[11], v_slots[12], v_slots[13], v_slots[14], v_slots[15], v_slots[16],
                                   v_slots[17])
              AND r.queue_id = v_qid
              AND r.priority = v_priority
              AND r.enqueue_shard = v_shard
              AND r.lane_seq BETWEEN v_lo AND v_hi
              AND (NOT EXISTS (SELECT 1 FROM {schema}.queue_meta m WHERE m.queue = p_queue AND m.shard_fence IS NOT NULL)
                   OR r.lane_seq < {schema}.shard_fence_cap(v_qid, v_priority, v_shard))),
        dead AS MATERIALIZED (
            SELECT t.lane_seq
            FROM {schema}.ready_tombstones t
            WHERE t.ready_slot IN (v_slots[1], v_slots[2], v_slots[3], v_slots[4], v_slots[5], v_slots[6], v_slots[7], v_slots[8],
                                   v_slots[9], v_slots[10], v_slots[11], v_slots[12], v_slots[13], v_slots[14], v_slots[15], v_slots[16],
                                   v_slots[17])
              AND t.queue_id = v_qid
              AND t.priority = v_priority
              AND t.enqueue_shard = v_shard
              AND t.lane_seq BETWEEN v_lo AND v_hi),
        live AS MATERIALIZED (
            SELECT p.* FROM picked p WHERE p.lane_seq NOT IN (SELECT d.lane_seq FROM dead d)),
        batch AS MATERIALIZED (
            INSERT INTO {schema}.claim_batches
                (claim_slot, batch_id, queue_id, priority, enqueue_shard, first_seq, last_seq,
                 n_items, claimed_at, deadline_at)
            SELECT v_claim_slot, nextval('{schema}.claim_batch_ids'), v_qid, v_priority, v_shard,
                   min(l.lane_seq), max(l.lane_seq), count(*), now(), now() + v_deadline
            FROM live l
            HAVING count(*) > 0
            RETURNING batch_id),
        advance AS (
            UPDATE {schema}.queue_claim_heads c
            SET claim_seq = (SELECT max(p.lane_seq) + 1 FROM picked p), claimed_at = now()
            WHERE c.queue_id = v_qid AND c.priority = v_priority AND c.enqueue_shard = v_shard
              AND EXISTS (SELECT 1 FROM picked))
        SELECT l.job_id, l.run_lease + 1, (l.attempt + 1)::smallint, l.enqueue_shard,
               l.ready_slot, l.lane_seq, v_claim_slot, b.batch_id, p_queue, l.priority,
               -- optional(aging) {
               {schema}.effective_priority(l.priority, l.run_at, v_aging_s)::smallint,
               --off l.priority,
               -- optional }
               l.kind, l.args, l.metadata, l.tags, l.max_attempts, l.ordering_key, l.errors,
               l.run_at, l.created_at, now(), now() + v_deadline
        FROM live l, batch b
        ORDER BY l.lane_seq;

        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows > 0 OR v_tries >= 8 THEN
            v_claimed := v_rows;
            EXIT;
        END IF;
    END LOOP;
    -- optional(limits) {
    IF v_max_rate IS NOT NULL AND v_claimed > 0 THEN
        UPDATE {schema}.queue_rate_buckets k SET tokens = k.tokens - v_claimed WHERE k.queue = p_queue;
    END IF;
    -- optional }
END
$$;
