-- awa dlq list: $1 id, $2 queue, $3 kind, $4 dead-lettered before now() - $4; NULL: any.
-- Oldest first, at most $5.
SELECT job_id, queue, kind, priority, attempt, max_attempts, reason, {schema}.iso_utc(dlq_at),
       args::text, {schema}.errors_iso(errors)::text
FROM {schema}.dlq_entries
WHERE ($1::bigint IS NULL OR job_id = $1::bigint)
  AND ($2::text IS NULL OR queue = $2::text)
  AND ($3::text IS NULL OR kind = $3::text)
  AND ($4::interval IS NULL OR dlq_at < now() - $4::interval)
ORDER BY dlq_at, job_id
LIMIT $5::integer
