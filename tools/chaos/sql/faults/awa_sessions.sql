-- The awa sessions a fault may terminate: workers name theirs awa-work-<pid>, producers'
-- public connections are "awa". No parameters; rows of (pid, application_name).
SELECT pid, application_name FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (application_name = 'awa' OR application_name LIKE 'awa-work-%')
ORDER BY pid
