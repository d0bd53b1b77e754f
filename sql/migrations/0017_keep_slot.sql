-- The queue ring's keep slot (sql/functions/0082_keep_slot.sql, docs/design/rings.md).
--
-- Work that outlives the slot it was written to — a failed job inside its retention, a
-- backlog older than a lap of the ring, the ready row of a long attempt — used to be
-- copied into the current slot at every prune that reached it, so each such row was
-- written once per lap for as long as it stayed. Prune now moves it once, into a fixed
-- extra partition (ready_slot = -1) that no rotation reaches; a sweep deletes each row
-- there once it is dead.

CREATE TABLE {schema}.ready_entries_keep PARTITION OF {schema}.ready_entries FOR VALUES IN (-1);
CREATE TABLE {schema}.done_entries_keep PARTITION OF {schema}.done_entries FOR VALUES IN (-1);
CREATE TABLE {schema}.ready_tombstones_keep PARTITION OF {schema}.ready_tombstones FOR VALUES IN (-1);

-- Whether the keep slot may hold live work (unclaimed rows, ready rows of open attempts)
-- after this prune: readers include the slot only then. Only a prune moves live work
-- into it, and each prune writes this column under the ring's lock.
ALTER TABLE {schema}.ring_prunes ADD COLUMN keep_live boolean NOT NULL DEFAULT false;
