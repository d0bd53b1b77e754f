-- $1 queue, $2 paused. Persisted in queue_meta, so it outlives every worker; the claim
-- (claim_ready_runtime) reads it on each call. A resume wakes the queue's listening
-- workers at once instead of at their next poll.
WITH upsert AS (
    INSERT INTO {schema}.queue_meta (queue, paused)
    VALUES ($1, $2)
    ON CONFLICT (queue) DO UPDATE SET paused = EXCLUDED.paused, updated_at = now()
    RETURNING paused)
SELECT u.paused, CASE WHEN NOT u.paused THEN pg_notify({schema}.notify_channel($1), '') END
FROM upsert u
