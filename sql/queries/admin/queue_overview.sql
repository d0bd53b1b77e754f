-- $1: one queue, or NULL for every known queue. Column order is read by position in
-- src/storage/admin_queues.cpp. The limits (migration 0009) come from queue_meta beside
-- queue_overview; one statement, so one snapshot.
SELECT o.queue, o.configured, o.enqueue_shards, o.paused, o.dlq_enabled, o.priority_aging_ms,
       o.deadline_ms, o.max_workers_hint, o.available, o.running, o.scheduled, o.retryable,
       o.completed, o.failed, o.cancelled, o.dlq, o.oldest_available_age_s,
       m.max_rate, m.burst, m.global_max_workers, o.waiting
FROM {schema}.queue_overview($1::text) AS o
LEFT JOIN {schema}.queue_meta m ON m.queue = o.queue
ORDER BY o.queue COLLATE "C"
