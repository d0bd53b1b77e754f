-- $1 ring, $2 carry live work forward, $3 failed-job retention (interval text).
SELECT pruned, generation, slot, rows_removed, rows_carried, coalesce(reason, '')
FROM {schema}.prune_ring($1, $2, $3::interval)
