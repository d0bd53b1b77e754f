-- Callback ids of attempts parked waiting for a callback on queue $1, at most $2 of them,
-- in random order (the resolver answers a random few each turn, as other systems would).
SELECT l.callback_id::text
FROM awa.leases l
WHERE l.queue_id = awa.queue_id_of($1) AND l.state = 'waiting_external' AND l.callback_id IS NOT NULL
ORDER BY random()
LIMIT $2
