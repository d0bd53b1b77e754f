-- awa cron list: every schedule by name ($1 true: only the stale ones). Stale: declared
-- by code ('code') but not by the latest start-up that declared any — its
-- last_declared_at is older than the newest one of all code schedules.
SELECT p.name, p.expression, p.tz, p.kind, p.queue, p.args::text, p.priority, p.max_attempts,
       coalesce(to_jsonb(p.tags), '[]'::jsonb)::text, coalesce(p.metadata, 'null'::jsonb)::text,
       p.catch_up, p.paused, {schema}.iso_utc(p.next_fire_at), {schema}.iso_utc(p.last_fired_at),
       p.last_job_id, p.last_error, {schema}.iso_utc(p.last_error_at), p.source,
       {schema}.iso_utc(p.last_declared_at), {schema}.iso_utc(p.created_at),
       {schema}.iso_utc(p.updated_at), s.stale
FROM {schema}.periodic_jobs p
CROSS JOIN LATERAL (
    SELECT coalesce(p.source = 'code' AND p.last_declared_at < (
               SELECT max(c.last_declared_at) FROM {schema}.periodic_jobs c
               WHERE c.source = 'code'), false) AS stale) s
WHERE NOT $1::boolean OR s.stale
ORDER BY p.name COLLATE "C"
