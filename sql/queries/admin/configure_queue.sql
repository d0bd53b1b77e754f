-- $1 queue; $2 dlq_enabled, $3 priority_aging_ms, $4 deadline_ms, $5 max_workers_hint,
-- $6 max_rate, $7 burst, $8 global_max_workers: NULL keeps the current value (the default
-- for a new row), 0 clears an optional number.
-- Out-of-range values fail queue_meta's CHECK constraints (23514): nothing changes.
INSERT INTO {schema}.queue_meta AS m (queue, dlq_enabled, priority_aging_ms, deadline_ms,
                                      max_workers_hint, max_rate, burst, global_max_workers)
VALUES ($1, coalesce($2::boolean, false), nullif($3::bigint, 0), nullif($4::bigint, 0),
        nullif($5::integer, 0), nullif($6::double precision, 0), nullif($7::integer, 0),
        nullif($8::integer, 0))
ON CONFLICT (queue) DO UPDATE SET
    dlq_enabled = coalesce($2::boolean, m.dlq_enabled),
    priority_aging_ms = CASE WHEN $3::bigint IS NULL THEN m.priority_aging_ms ELSE nullif($3::bigint, 0) END,
    deadline_ms = CASE WHEN $4::bigint IS NULL THEN m.deadline_ms ELSE nullif($4::bigint, 0) END,
    max_workers_hint = CASE WHEN $5::integer IS NULL THEN m.max_workers_hint ELSE nullif($5::integer, 0) END,
    max_rate = CASE WHEN $6::double precision IS NULL THEN m.max_rate ELSE nullif($6::double precision, 0) END,
    burst = CASE WHEN $7::integer IS NULL THEN m.burst ELSE nullif($7::integer, 0) END,
    global_max_workers = CASE WHEN $8::integer IS NULL THEN m.global_max_workers ELSE nullif($8::integer, 0) END,
    updated_at = now()
RETURNING m.queue, m.enqueue_shards, m.paused, m.dlq_enabled, m.priority_aging_ms, m.deadline_ms,
          m.max_workers_hint, m.max_rate, m.burst, m.global_max_workers
