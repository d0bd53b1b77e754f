-- Worker processes registered in runtime_instances (migration 0003) and seen within the
-- last minute (each ticks every few seconds).
SELECT format('instance %s (pid %s on %s, seen %s s ago)', i.instance_id, i.pid, i.hostname,
              round(extract(epoch FROM now() - i.last_seen_at)))
FROM {schema}.runtime_instances i
WHERE i.last_seen_at > now() - interval '60 seconds'
ORDER BY i.started_at
