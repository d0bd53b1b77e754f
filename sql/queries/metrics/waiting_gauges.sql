-- refresh_queue_gauges (src/storage/queue_gauges.cpp): jobs waiting for their parents, per
-- queue that has any. $1 queues (text[] literal, or NULL: every queue).
SELECT w.queue, count(*)
FROM {schema}.waiting_jobs w
WHERE $1::text[] IS NULL OR w.queue = ANY ($1::text[])
GROUP BY w.queue
