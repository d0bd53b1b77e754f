-- Admin::health: runtime instances seen within the window, and the one flagged as leader
-- whenever it was last seen (a dead leader's row is how health tells "the leader stopped
-- ticking" from "there never was one"). Times as ISO 8601 UTC text; ages in seconds by
-- the server's clock (clock_timestamp(): the caller may be inside an old transaction).
-- $1: the window, in seconds.
SELECT i.instance_id::text, i.hostname, i.pid, array_to_json(i.queues)::text,
       to_char(i.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       to_char(i.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       i.is_leader,
       extract(epoch FROM clock_timestamp() - i.leader_tick_at)::float8,
       i.last_seen_at >= clock_timestamp() - make_interval(secs => $1)
FROM {schema}.runtime_instances i
WHERE i.last_seen_at >= clock_timestamp() - make_interval(secs => $1) OR i.is_leader
ORDER BY i.started_at, i.instance_id
