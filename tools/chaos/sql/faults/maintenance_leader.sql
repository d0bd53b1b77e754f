-- The session holding schema awa's maintenance leader lock (docs/runtime.md: advisory lock
-- (hashtext(schema), 1279607108)). No parameters; rows of (pid, application_name).
SELECT a.pid, a.application_name
FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE l.locktype = 'advisory' AND l.granted AND l.objid = 1279607108 AND l.objsubid = 2
  AND l.classid = hashtext('awa')::oid
