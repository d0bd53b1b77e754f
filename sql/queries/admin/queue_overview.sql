-- $1: one queue, or NULL for every known queue. Column order is read by position in
-- src/storage/admin_queues.cpp.
SELECT queue, configured, enqueue_shards, paused, dlq_enabled, priority_aging_ms, deadline_ms,
       max_workers_hint, available, running, scheduled, retryable, completed, failed, cancelled,
       dlq, oldest_available_age_s
FROM {schema}.queue_overview($1::text)
