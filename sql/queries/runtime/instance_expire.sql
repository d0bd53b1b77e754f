-- The maintenance leader forgets instances not seen for a long time (killed processes:
-- a clean stop removes its own row). Returns how many rows went.
-- $1 how long an instance may go unseen (interval text).
WITH gone AS (
    DELETE FROM {schema}.runtime_instances
    WHERE last_seen_at < now() - $1::interval
    RETURNING 1)
SELECT count(*)::integer FROM gone
