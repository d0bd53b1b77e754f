-- Ring cursors (docs/design/rings.md). A ring's generation g lives in slot
-- g % slot_count. The current generation is the newest row of the append-only
-- ring_rotations ledger; generations up to the newest ring_prunes row have been
-- truncated. Rotation and prune append to those ledgers and never update a row.
--
-- These are plpgsql on purpose: they run on every claim and enqueue, and a SQL-language
-- function that PostgreSQL cannot inline (a body with FROM) is planned again on every
-- call (measured: 0.85 ms for ring_position that way, against tens of microseconds with
-- plpgsql's cached plans).

-- The ring's current (generation, slot).
CREATE OR REPLACE FUNCTION {schema}.ring_current(p_ring text, OUT generation bigint, OUT slot smallint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT r.generation, r.slot INTO generation, slot FROM {schema}.ring_rotations r
    WHERE r.ring = p_ring ORDER BY r.generation DESC LIMIT 1;
END
$$;

-- The slot that receives new rows of the ring.
CREATE OR REPLACE FUNCTION {schema}.ring_current_slot(p_ring text)
RETURNS smallint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT r.slot FROM {schema}.ring_rotations r
            WHERE r.ring = p_ring ORDER BY r.generation DESC LIMIT 1);
END
$$;

-- The newest generation that has been pruned, -1 when none has.
CREATE OR REPLACE FUNCTION {schema}.ring_pruned_through(p_ring text)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT p.generation FROM {schema}.ring_prunes p
                     WHERE p.ring = p_ring ORDER BY p.generation DESC LIMIT 1), -1);
END
$$;

-- Where a ring stands: its current generation, the newest pruned one (-1 when none) and
-- its slot count. Three index probes; rotation and prune change the first two.
CREATE OR REPLACE FUNCTION {schema}.ring_position(
    p_ring text, OUT current_generation bigint, OUT pruned_through bigint, OUT slot_count integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    current_generation := (SELECT r.generation FROM {schema}.ring_rotations r
                           WHERE r.ring = p_ring ORDER BY r.generation DESC LIMIT 1);
    pruned_through := coalesce((SELECT p.generation FROM {schema}.ring_prunes p
                                WHERE p.ring = p_ring ORDER BY p.generation DESC LIMIT 1), -1);
    slot_count := (SELECT s.slot_count FROM {schema}.ring_state s WHERE s.ring = p_ring);
END
$$;

-- The slots of generations p_from .. p_to (at most the last p_slot_count of them), oldest
-- first.
CREATE OR REPLACE FUNCTION {schema}.ring_slots_between(p_from bigint, p_to bigint, p_slot_count integer)
RETURNS smallint[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_out smallint[] := '{}';
    v_g   bigint;
BEGIN
    FOR v_g IN greatest(p_from, p_to - p_slot_count + 1) .. p_to LOOP
        v_out := v_out || (v_g % p_slot_count)::smallint;
    END LOOP;
    RETURN v_out;
END
$$;

-- Whether the queue ring's keep slot (-1, migration 0017) may hold live work, as the
-- newest prune left it: false for the other rings and before any prune.
CREATE OR REPLACE FUNCTION {schema}.ring_keep_live(p_ring text)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT p.keep_live FROM {schema}.ring_prunes p
                     WHERE p.ring = p_ring ORDER BY p.generation DESC LIMIT 1), false)
$$;

-- Slots of a ring that may hold live work, oldest first: the keep slot (-1) when it may
-- (ring_keep_live), then every generation after the last pruned one, up to the current
-- one. Retained failed jobs in the keep slot are not live work: job lookups read the
-- keep slot by key.
CREATE OR REPLACE FUNCTION {schema}.ring_live_slots(p_ring text)
RETURNS smallint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v record;
BEGIN
    SELECT * INTO v FROM {schema}.ring_position(p_ring);
    RETURN CASE WHEN {schema}.ring_keep_live(p_ring) THEN ARRAY[-1]::smallint[] ELSE '{}' END
           || {schema}.ring_slots_between(v.pruned_through + 1, v.current_generation, v.slot_count);
END
$$;

-- The advisory-lock key of a claim batch (classid: hash of "<schema>:attempts", apart
-- from the lane and lane-creation key spaces). Every path that closes an attempt takes
-- it exclusively, heartbeats take it shared, always in ascending key order.
CREATE OR REPLACE FUNCTION {schema}.attempt_lock_key(p_batch bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT ((p_batch & 4294967295) - 2147483648)::integer
$$;
