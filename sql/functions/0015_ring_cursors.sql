-- Ring cursors (docs/design/rings.md). A ring's generation g lives in slot
-- g % slot_count. The current generation is the newest row of the append-only
-- ring_rotations ledger; generations up to the newest ring_prunes row have been
-- truncated. Rotation and prune append to those ledgers and never update a row.

-- The ring's current (generation, slot).
CREATE OR REPLACE FUNCTION {schema}.ring_current(p_ring text, OUT generation bigint, OUT slot smallint)
LANGUAGE sql STABLE AS $$
    SELECT r.generation, r.slot FROM {schema}.ring_rotations r
    WHERE r.ring = p_ring ORDER BY r.generation DESC LIMIT 1
$$;

-- The slot that receives new rows of the ring.
CREATE OR REPLACE FUNCTION {schema}.ring_current_slot(p_ring text)
RETURNS smallint
LANGUAGE sql STABLE AS $$
    SELECT r.slot FROM {schema}.ring_rotations r
    WHERE r.ring = p_ring ORDER BY r.generation DESC LIMIT 1
$$;

-- The newest generation that has been pruned, -1 when none has.
CREATE OR REPLACE FUNCTION {schema}.ring_pruned_through(p_ring text)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT p.generation FROM {schema}.ring_prunes p
                     WHERE p.ring = p_ring ORDER BY p.generation DESC LIMIT 1), -1)
$$;

-- Slots of a ring that may hold rows, oldest generation first: every generation after
-- the last pruned one, up to the current one (at most slot_count of them).
CREATE OR REPLACE FUNCTION {schema}.ring_live_slots(p_ring text)
RETURNS smallint[]
LANGUAGE sql STABLE AS $$
    SELECT array_agg((g % s.slot_count)::smallint ORDER BY g)
    FROM {schema}.ring_state s,
         {schema}.ring_current(p_ring) c,
         generate_series(greatest({schema}.ring_pruned_through(p_ring) + 1,
                                  c.generation - s.slot_count + 1),
                         c.generation) AS g
    WHERE s.ring = p_ring
$$;

-- The advisory-lock key of a claim batch (classid: hash of "<schema>:attempts", apart
-- from the lane and lane-creation key spaces). Every path that closes an attempt takes
-- it exclusively, heartbeats take it shared, always in ascending key order.
CREATE OR REPLACE FUNCTION {schema}.attempt_lock_key(p_batch bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT ((p_batch & 4294967295) - 2147483648)::integer
$$;
