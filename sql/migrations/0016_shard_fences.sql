-- Per-key order across a change of enqueue_shards (sql/functions/0022_shard_fences.sql).
--
-- A keyed job goes to shard hash(key) % S, so when S changes a key's next job may land on
-- another shard than its predecessors, which may still wait on theirs. A change of S
-- therefore records a fence: every lane's enqueue cursor at that moment. Until each lane
-- has claimed everything below its fence, claims take rows below the fences only; rows
-- at or above a fence, and every row of a lane created after it, wait. Several changes
-- in a row stack up as epochs, lifted oldest first.

-- One epoch per change of enqueue_shards that found unclaimed rows.
CREATE SEQUENCE {schema}.shard_fence_epochs AS bigint;

-- One row per lane that had rows not yet claimed when the epoch began: claims may take
-- the lane's rows with lane_seq < fence_seq while the epoch is the oldest. A lane without
-- a row in the oldest epoch takes nothing until that epoch is lifted.
CREATE TABLE {schema}.shard_fences (
    queue         text     NOT NULL,
    epoch         bigint   NOT NULL,
    priority      smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    fence_seq     bigint   NOT NULL,
    PRIMARY KEY (queue, epoch, priority, enqueue_shard)
);

-- The newest epoch of the queue still fenced, NULL when none: the claim reads it with the
-- queue's other settings, so an unfenced queue pays nothing.
ALTER TABLE {schema}.queue_meta ADD COLUMN shard_fence bigint;
