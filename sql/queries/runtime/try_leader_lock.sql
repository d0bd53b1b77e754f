-- Maintenance leader election (docs/runtime.md): a session-level advisory lock keyed by
-- the schema name, so each schema has its own leader. 1279607108 is 0x4C454144, "LEAD".
-- Session-scoped on purpose: the lock lives exactly as long as the leader's connection,
-- so a crashed or partitioned leader loses it when its backend goes away.
-- $1: the schema name, unquoted.
SELECT pg_try_advisory_lock(hashtext($1), 1279607108)
