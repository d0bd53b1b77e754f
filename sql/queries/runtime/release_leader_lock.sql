-- Gives up maintenance leadership before the connection closes (closing releases it too;
-- unlocking first lets a waiting process take over without waiting for backend exit).
-- $1: the schema name, unquoted.
SELECT pg_advisory_unlock(hashtext($1), 1279607108)
