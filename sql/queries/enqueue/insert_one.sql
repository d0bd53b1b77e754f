-- One ready job in one statement, without PL/pgSQL: the single-job path of insert()
-- (src/storage/enqueue_one.cpp). $1 the queue's id (queue_ids, cached by the producer with
-- the shard count), $2 priority, $3 enqueue_shard, $4 kind, $5 args, $6 max_attempts,
-- $7 run_at (NULL: now), $8 ordering_key, $9 metadata, $10 tags.
-- {slot} is the queue-ring slot the producer last saw as current; the caller renders one
-- statement per slot.
--
-- It keeps reserve_lane_range's two guarantees (sql/functions/0020_lanes.sql):
--   - The lane lock is taken (the materialised `lane`) before nextval of the lane's
--     sequence, and held to commit: the lane's FIFO visibility argument
--     (docs/design/engine.md).
--   - The rows go to a slot prune cannot truncate under them. Naming the partition makes
--     PostgreSQL take its ROW EXCLUSIVE lock when the statement is bound, before the
--     statement's snapshot is taken; `cur` then reads the current slot in that snapshot.
--     If it is {slot}, no prune of {slot} committed before the lock (prune never truncates
--     the current slot, and the ring reaches a slot again only after pruning it), and none
--     can run until this transaction ends (prune's locks are NOWAIT). A long wait for the
--     lane lock may see the ring rotate meanwhile; the slot stays live (locked), as
--     reserve_lane_range allows.
-- Nothing is written, no lane locked, when {slot} is not the current slot or the lane row
-- is missing (its creation rolled back): job_id is NULL then, current_slot says where the
-- ring is, and the caller retries on that slot or takes the general path.
WITH cur AS (
    SELECT r.slot
    FROM {schema}.ring_rotations r
    WHERE r.ring = 'queue'
    ORDER BY r.generation DESC
    LIMIT 1),
lane AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(hashtext('{schema}'), h.lane_id) AS locked, h.seq
    FROM {schema}.queue_enqueue_heads h
    WHERE h.queue_id = $1 AND h.priority = $2 AND h.enqueue_shard = $3
      AND (SELECT cur.slot FROM cur) = {slot}),
ins AS (
    INSERT INTO {schema}.ready_entries_{slot}
        (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
         max_attempts, run_at, created_at, ordering_key, metadata, tags)
    SELECT {slot}, $1::integer, $2, $3, nextval(lane.seq), nextval('{schema}.job_ids'), $4, $5::jsonb,
           $6, coalesce($7::timestamptz, now()), now(), $8::bytea, $9::jsonb, $10::text[]
    FROM lane
    RETURNING job_id)
SELECT (SELECT cur.slot FROM cur) AS current_slot, (SELECT ins.job_id FROM ins) AS job_id
