-- Wakes one runtime thread blocked in LISTEN on its private channel (stop()).
-- $1: the channel.
SELECT pg_notify($1, '')
