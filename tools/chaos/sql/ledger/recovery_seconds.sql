-- Seconds from a fault to the first completion of an attempt claimed after it (NULL: none).
-- $1: the fault time, seconds since the Unix epoch.
SELECT extract(epoch FROM min(c.closed_at) - to_timestamp($1::double precision))
FROM awa.claim_closures c
JOIN awa.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
WHERE c.outcome = 'completed' AND b.claimed_at > to_timestamp($1::double precision)
