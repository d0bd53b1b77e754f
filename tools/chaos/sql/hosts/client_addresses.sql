-- The workers' connections by the address they came from (a veth address per simulated
-- host in netns mode, 127.0.0.1 on loopback); the asking session is left out. No parameters.
SELECT coalesce(host(client_addr), 'local'), count(*)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = current_database()
  AND pid <> pg_backend_pid()
GROUP BY 1
ORDER BY 1
