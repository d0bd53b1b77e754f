-- Sessions of this database, other than ours, that look like workers of this schema: their
-- last statement named it ($1: the schema's quoted name and a dot, as every statement of
-- awa names its tables) and they ran it within the last minute, or run it now. Older
-- builds register nowhere else. pg_stat_activity shows another role's statements only
-- to members of pg_read_all_stats (and superusers): sessions it hides are not seen.
SELECT format('session pid %s (application_name %L, %s)', a.pid, a.application_name,
              CASE WHEN a.state = 'active' THEN 'running a statement now'
                   ELSE format('last statement %s s ago',
                               round(extract(epoch FROM now() - a.state_change))) END)
FROM pg_catalog.pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND a.backend_type = 'client backend'
  AND position($1 IN a.query) > 0
  AND (a.state = 'active' OR a.state_change > now() - interval '60 seconds')
ORDER BY a.pid
