-- Per-key order across a change of enqueue_shards (migration 0016_shard_fences.sql).
--
-- A keyed job goes to shard hash(key) % S. When S changes, a key's next job may go to
-- another shard than its predecessors, which may not have been claimed yet; claimed
-- independently, the two shards would run the key out of order. Two rules keep it:
--
-- 1. A change of S is a cut between producers. Every producer of keyed jobs holds the
--    queue's reshard lock in SHARE mode (hold_shard_counts) from before it reads S and
--    takes a lane lock until its transaction ends, and routes with the S it read after
--    taking it; the C++ producer, which caches S, has its cached value checked there
--    (check_shard_counts) and re-routes when it changed. The change itself (the trigger
--    below, on any write of queue_meta.enqueue_shards: `awa queue set-shards`, or the
--    plain upsert of docs/operations.md) takes the lock EXCLUSIVE, so it waits for the keyed
--    producers in flight, and producers after it read the new S. Every keyed row routed
--    with the old S is therefore committed, with a lane_seq below its lane's enqueue
--    cursor at that moment, and every keyed row routed with the new S comes after.
--    Unkeyed producers do not take the lock: they promise no order across shards.
-- 2. A fence holds back what came after the cut. The change records each lane's
--    enqueue cursor (the fence) for the lanes that still hold unclaimed rows, as one
--    epoch. While an epoch is the queue's oldest, claims take rows below the fences only
--    (claim_ready_runtime, through shard_fence_cap in each statement that picks rows):
--    rows at or above a fence, and every row of a lane that has no fence in the epoch (a
--    shard the new S added), wait. When every fenced lane has nothing left below its
--    fence, the next claim lifts the epoch (shard_fence_now).
--    Several changes in a row stack epochs, lifted in order. The cost is a pause of the
--    rows after the cut until the rows before it are claimed; a queue with no unclaimed
--    rows at the change gets no fence at all.
--
-- The lock is an advisory lock in its own key space (classid = hash of
-- "<schema>:reshard", objid = hash of the queue name). A producer takes it before any
-- lane lock of its transaction and the change takes no lane lock, so neither can close a
-- waits-for cycle through the other.
--
-- Guaranteed for producers in READ COMMITTED transactions (the default, and every
-- transaction the C++ producer and the maintenance leader run themselves). A REPEATABLE
-- READ or SERIALIZABLE producer transaction that began before a change reads the old S
-- from its snapshot; it gets 40001 at commit instead (FOR SHARE of the queue_meta row),
-- except on the very first change of a queue that had no queue_meta row yet.

-- Takes the reshard lock in SHARE mode for each queue, in one order (C collation), and
-- holds it until the transaction ends. Run it before reading the queues' shard counts
-- and before any lane lock. Volatile, so the caller's next statement takes a new
-- snapshot that shows any change committed while this one waited.
CREATE OR REPLACE FUNCTION {schema}.hold_shard_counts(p_queues text[])
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_queue text;
BEGIN
    FOR v_queue IN
        SELECT d.q FROM (SELECT DISTINCT u.q FROM unnest(p_queues) AS u(q) WHERE u.q IS NOT NULL) d
        ORDER BY d.q COLLATE "C"
    LOOP
        PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}:reshard'), hashtext(v_queue));
    END LOOP;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM {schema}.queue_meta m WHERE m.queue = ANY (p_queues) FOR SHARE;
    END IF;
END
$$;

-- The C++ producer's check, the first statement of a self-committing enqueue with keyed
-- rows: hold the queues' reshard locks, then compare the shard count each queue has now
-- with the one the producer routed with. 40001 when one differs; the producer forgets its
-- cached counts and retries the enqueue, which has written nothing.
CREATE OR REPLACE FUNCTION {schema}.check_shard_counts(p_queues text[], p_shards integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_row record;
BEGIN
    IF cardinality(p_queues) IS DISTINCT FROM cardinality(p_shards) THEN
        RAISE EXCEPTION 'check_shard_counts: % queues but % shard counts',
            cardinality(p_queues), cardinality(p_shards) USING ERRCODE = '22023';
    END IF;
    PERFORM {schema}.hold_shard_counts(p_queues);
    FOR v_row IN
        SELECT u.q, u.s, {schema}.queue_shard_count(u.q) AS now_s
        FROM unnest(p_queues, p_shards) AS u(q, s)
    LOOP
        IF v_row.now_s <> v_row.s THEN
            RAISE EXCEPTION 'enqueue_shards of queue "%" changed to % (the producer routed with %); retry the enqueue',
                v_row.q, v_row.now_s, v_row.s USING ERRCODE = '40001';
        END IF;
    END LOOP;
END
$$;

-- The change of a queue's shard count (rule 1 and 2 above): BEFORE INSERT OR UPDATE OF
-- enqueue_shards on queue_meta. An INSERT of a queue that had no row changes S from 1;
-- the INSERT of an upsert whose row exists leaves the work to its UPDATE.
CREATE OR REPLACE FUNCTION {schema}.fence_shard_change()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_old   integer;
    v_epoch bigint;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_old := OLD.enqueue_shards;
    ELSIF EXISTS (SELECT 1 FROM {schema}.queue_meta m WHERE m.queue = NEW.queue) THEN
        RETURN NEW;
    ELSE
        v_old := 1;
    END IF;
    IF NEW.enqueue_shards IS NOT DISTINCT FROM v_old THEN
        RETURN NEW;
    END IF;
    -- Later statements must see every lane and row the waited-for producers committed.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'change enqueue_shards of queue "%" in a READ COMMITTED transaction (this one is %)',
            NEW.queue, current_setting('transaction_isolation') USING ERRCODE = '0A000';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('{schema}:reshard'), hashtext(NEW.queue));

    v_epoch := nextval('{schema}.shard_fence_epochs');
    INSERT INTO {schema}.shard_fences (queue_id, epoch, priority, enqueue_shard, fence_seq)
    SELECT h.queue_id, v_epoch, h.priority, h.enqueue_shard, l.next_seq
    FROM {schema}.queue_enqueue_heads h
    JOIN {schema}.queue_claim_heads c USING (queue_id, priority, enqueue_shard)
    CROSS JOIN LATERAL (SELECT coalesce(pg_sequence_last_value(h.seq), 0) + 1 AS next_seq) l
    WHERE h.queue_id = {schema}.queue_id_of(NEW.queue) AND c.claim_seq < l.next_seq;
    IF FOUND THEN
        NEW.shard_fence := v_epoch;
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS fence_shard_change ON {schema}.queue_meta;
CREATE TRIGGER fence_shard_change
    BEFORE INSERT OR UPDATE OF enqueue_shards ON {schema}.queue_meta
    FOR EACH ROW EXECUTE FUNCTION {schema}.fence_shard_change();
ALTER TABLE {schema}.queue_meta ENABLE ALWAYS TRIGGER fence_shard_change;

-- The queue's oldest epoch still fenced, for a claim (claim_ready_runtime calls it when
-- queue_meta.shard_fence, read as p_seen, is set). Lifts, oldest first, every epoch whose
-- fenced lanes have nothing left below their fences: no ready row from the claim cursor
-- up to the fence (claimed, cancelled and rolled-back ranges all count as passed; an
-- unkeyed row not yet committed may still come, which no key's order depends on). With
-- none left, clears shard_fence unless a newer change set it meanwhile; NULL then.
-- It never waits: one claim of the queue lifts at a time (the others, and a claim that
-- finds a change of the count in progress, leave the lifting to a later claim and return
-- NULL), so claims do not queue up behind each other's lifting.
-- SECURITY DEFINER (sql/security/function_settings.sql): the worker may not write
-- queue_meta otherwise.
CREATE OR REPLACE FUNCTION {schema}.shard_fence_now(p_queue text, p_seen bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
    v_qid   integer := {schema}.queue_id_of(p_queue);
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('{schema}:reshard_lift'), hashtext(p_queue)) THEN
        RETURN NULL;
    END IF;
    LOOP
        SELECT min(f.epoch) INTO v_epoch FROM {schema}.shard_fences f WHERE f.queue_id = v_qid;
        IF v_epoch IS NULL THEN
            UPDATE {schema}.queue_meta m SET shard_fence = NULL
            WHERE m.queue = p_queue AND m.shard_fence = p_seen
              AND m.queue IN (SELECT l.queue FROM {schema}.queue_meta l
                              WHERE l.queue = p_queue FOR UPDATE SKIP LOCKED);
            RETURN NULL;
        END IF;
        IF EXISTS (
            SELECT 1
            FROM {schema}.shard_fences f
            JOIN {schema}.queue_claim_heads c USING (queue_id, priority, enqueue_shard)
            WHERE f.queue_id = v_qid AND f.epoch = v_epoch AND c.claim_seq < f.fence_seq
              AND EXISTS (SELECT 1 FROM {schema}.ready_entries r
                          WHERE r.queue_id = f.queue_id AND r.priority = f.priority
                            AND r.enqueue_shard = f.enqueue_shard
                            AND r.lane_seq >= c.claim_seq AND r.lane_seq < f.fence_seq)) THEN
            RETURN v_epoch;
        END IF;
        DELETE FROM {schema}.shard_fences f WHERE f.queue_id = v_qid AND f.epoch = v_epoch;
    END LOOP;
END
$$;

-- A lane's cap: claims may take its rows with lane_seq below it. No fence: no cap (the
-- largest bigint). Otherwise the lane's fence in the queue's oldest epoch, or 0 (nothing)
-- for a lane that epoch has no fence for. STABLE, so it reads in the snapshot of the
-- claim statement that calls it: a statement that sees a row enqueued after a change also
-- sees that change's fence, which was committed first (rule 1). claim_ready_runtime calls
-- it only when queue_meta.shard_fence is set in its own snapshot.
CREATE OR REPLACE FUNCTION {schema}.shard_fence_cap(p_queue_id integer, p_priority smallint,
                                                     p_shard smallint)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN o.epoch IS NULL THEN 9223372036854775807
                ELSE coalesce((SELECT f.fence_seq FROM {schema}.shard_fences f
                               WHERE f.queue_id = p_queue_id AND f.epoch = o.epoch
                                 AND f.priority = p_priority AND f.enqueue_shard = p_shard), 0)
           END
    FROM (SELECT min(e.epoch) AS epoch FROM {schema}.shard_fences e WHERE e.queue_id = p_queue_id) o
$$;
