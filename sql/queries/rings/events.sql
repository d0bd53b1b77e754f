-- The last rotation and prune of every ring, and the latest reason each action was
-- skipped. Times as ISO 8601 UTC text.
WITH events AS (
    SELECT 'rotate' AS kind, r.ring, r.generation, r.slot, r.rotated_at AS at,
           0::bigint AS rows_removed, 0::bigint AS rows_carried, '' AS reason
    FROM (SELECT DISTINCT ON (ring) * FROM {schema}.ring_rotations ORDER BY ring, generation DESC) r
    UNION ALL
    SELECT 'prune', p.ring, p.generation, p.slot, p.pruned_at, p.rows_removed, p.rows_carried, ''
    FROM (SELECT DISTINCT ON (ring) * FROM {schema}.ring_prunes ORDER BY ring, generation DESC) p
    UNION ALL
    SELECT 'skip:' || s.action, s.ring, 0, 0, s.skipped_at, 0, 0, s.reason
    FROM {schema}.ring_skips s)
SELECT kind, ring, generation, slot,
       to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), rows_removed,
       rows_carried, reason
FROM events
