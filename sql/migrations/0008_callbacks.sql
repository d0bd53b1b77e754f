-- External callbacks (issue 14; docs/scheduling.md "External callbacks"). An attempt that
-- waits for another system keeps its lease row (state waiting_external) with the id the
-- other system answers with. The id is random (gen_random_uuid), so knowing one job's id
-- does not let anyone guess another's callback. Not unique by constraint (leases are
-- partitioned by lease_slot, and a unique index must include it); 122 random bits are.
ALTER TABLE {schema}.leases ADD COLUMN callback_id uuid;
CREATE INDEX leases_callback_id ON {schema}.leases (callback_id) WHERE callback_id IS NOT NULL;
