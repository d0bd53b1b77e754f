-- Rings that rotate and prune, a narrow receipt plane, bounded history
-- (docs/design/rings.md).
--
-- 1. Ring cursors become append-only ledgers: ring_rotations (one row per rotation, the
--    current slot is the newest generation's) and ring_prunes (one row per pruned
--    generation). ring_state keeps only the cold configuration (slot_count); no control
--    row is rewritten per rotation.
-- 2. Per-job receipts (lease_claims) are replaced by one claim_batches row per claim call
--    (it names the lane range it took) and append-only claim_closures rows (per batch and
--    flush, the lane_seqs it closed). A successful completion writes no per-job row.
-- 3. ready_tombstones is partitioned with the queue ring, so prune truncates it too.
-- 4. Terminal counts survive prune in terminal_rollups.

-- Attempts still open on a per-job receipt would lose their receipt: refuse, and say what
-- to do. (Finished attempts convert: their done rows stay where they are.)
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM {schema}.lease_claims lc
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.done_entries d
            WHERE d.ready_slot = lc.ready_slot AND d.queue = lc.queue AND d.priority = lc.priority
              AND d.enqueue_shard = lc.enqueue_shard AND d.lane_seq = lc.lane_seq)) THEN
        RAISE EXCEPTION 'migration 0002: attempts are still running on the old receipt format'
            USING ERRCODE = '55000',
                  HINT = 'stop the workers of this schema gracefully (they finish what they run), then migrate';
    END IF;
END
$$;

-- Ring cursors.
CREATE TABLE {schema}.ring_rotations (
    ring       text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
    generation bigint      NOT NULL CHECK (generation >= 0),
    slot       smallint    NOT NULL,
    rotated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ring, generation)
);
INSERT INTO {schema}.ring_rotations (ring, generation, slot)
SELECT ring, current_slot, current_slot FROM {schema}.ring_state;

CREATE TABLE {schema}.ring_prunes (
    ring         text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
    generation   bigint      NOT NULL,
    slot         smallint    NOT NULL,
    pruned_at    timestamptz NOT NULL DEFAULT now(),
    rows_removed bigint      NOT NULL,
    rows_carried bigint      NOT NULL,
    PRIMARY KEY (ring, generation)
);

-- Why the last rotation or prune of a ring did nothing. Status only: unlogged, one row per
-- (ring, action), overwritten; never read by the engine.
CREATE UNLOGGED TABLE {schema}.ring_skips (
    ring       text        NOT NULL,
    action     text        NOT NULL CHECK (action IN ('rotate', 'prune')),
    skipped_at timestamptz NOT NULL DEFAULT now(),
    reason     text        NOT NULL,
    PRIMARY KEY (ring, action)
);

ALTER TABLE {schema}.ring_state DROP COLUMN current_slot;
ALTER TABLE {schema}.ring_state DROP COLUMN oldest_slot;
ALTER TABLE {schema}.ring_state DROP COLUMN generation;

-- Tombstones, partitioned with the queue ring.
ALTER TABLE {schema}.ready_tombstones RENAME TO ready_tombstones_v1;
ALTER TABLE {schema}.ready_tombstones_v1 RENAME CONSTRAINT ready_tombstones_pkey TO ready_tombstones_v1_pkey;
CREATE TABLE {schema}.ready_tombstones (
    ready_slot    smallint    NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    lane_seq      bigint      NOT NULL,
    job_id        bigint      NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq)
) PARTITION BY LIST (ready_slot);

-- Claim ring: one row per claim call. The batch's attempts are the ready rows of its lane
-- with lane_seq in [first_seq, last_seq] that were not tombstoned when it was claimed
-- (cancel only tombstones rows at or above the claim cursor, under the claim-head lock,
-- so that set never changes afterwards); n_items counts them. Each attempt's run_lease is
-- its ready row's run_lease + 1.
CREATE SEQUENCE {schema}.claim_batch_ids AS bigint CACHE 64;
CREATE TABLE {schema}.claim_batches (
    claim_slot    smallint    NOT NULL,
    batch_id      bigint      NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    first_seq     bigint      NOT NULL,
    last_seq      bigint      NOT NULL,
    n_items       integer     NOT NULL CHECK (n_items >= 1),
    claimed_at    timestamptz NOT NULL,
    deadline_at   timestamptz,
    PRIMARY KEY (claim_slot, batch_id)
) PARTITION BY LIST (claim_slot);
-- Closers find a batch by id alone: prune may have carried it to a newer slot.
CREATE INDEX claim_batches_batch_id ON {schema}.claim_batches (batch_id);
-- Rescue's candidate scans (old claims, expired deadlines) stay index range scans however
-- many closed batches a ring not yet pruned still holds.
CREATE INDEX claim_batches_claimed_at ON {schema}.claim_batches (claimed_at);
CREATE INDEX claim_batches_deadline_at ON {schema}.claim_batches (deadline_at) WHERE deadline_at IS NOT NULL;

-- Closure evidence: an attempt (batch_id, lane_seq) is closed iff one of its batch's
-- closure rows contains its lane_seq. outcome 'completed' rows are the whole record of a
-- successful attempt; 'closed' rows stand beside a per-attempt done_entries row.
-- lane_seqs is a multirange: a flush that closes a whole 512-row claim stores one range
-- (an array would be 4 kB, toasted); n_closed counts the lane_seqs in it.
CREATE TABLE {schema}.claim_closures (
    claim_slot smallint       NOT NULL,
    batch_id   bigint         NOT NULL,
    outcome    text           NOT NULL CHECK (outcome IN ('completed', 'closed')),
    lane_seqs  int8multirange NOT NULL,
    n_closed   integer        NOT NULL CHECK (n_closed >= 1),
    closed_at  timestamptz    NOT NULL DEFAULT now()
) PARTITION BY LIST (claim_slot);
CREATE INDEX claim_closures_batch_id ON {schema}.claim_closures (batch_id);

DROP TABLE {schema}.lease_claims;

-- Leases name their claim batch (the attempt is (claim_batch, lane_seq)). Rows of closed
-- attempts are orphans (the check above found no open attempt): drop them.
DELETE FROM {schema}.leases;
ALTER TABLE {schema}.leases DROP COLUMN claim_slot;
ALTER TABLE {schema}.leases ADD COLUMN claim_batch bigint NOT NULL;

-- Terminal counts of pruned slots, per queue and state; queue_counts_exact adds what is
-- still retained in the rings.
CREATE TABLE {schema}.terminal_rollups (
    queue text   NOT NULL,
    state text   NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled')),
    jobs  bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

DO $$
DECLARE
    slot int;
BEGIN
    FOR slot IN 0..(SELECT slot_count - 1 FROM {schema}.ring_state WHERE ring = 'queue') LOOP
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.ready_tombstones FOR VALUES IN (%s)',
                       '{schema}', 'ready_tombstones_' || slot, '{schema}', slot);
    END LOOP;
    FOR slot IN 0..(SELECT slot_count - 1 FROM {schema}.ring_state WHERE ring = 'claim') LOOP
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.claim_batches FOR VALUES IN (%s)',
                       '{schema}', 'claim_batches_' || slot, '{schema}', slot);
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.claim_closures FOR VALUES IN (%s)',
                       '{schema}', 'claim_closures_' || slot, '{schema}', slot);
    END LOOP;
END
$$;

INSERT INTO {schema}.ready_tombstones SELECT * FROM {schema}.ready_tombstones_v1;
DROP TABLE {schema}.ready_tombstones_v1;
