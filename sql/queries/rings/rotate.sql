-- $1 ring.
SELECT rotated, generation, slot, coalesce(reason, '') FROM {schema}.rotate_ring($1)
