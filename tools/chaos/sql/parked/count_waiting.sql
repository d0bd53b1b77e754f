-- Attempts parked waiting for a callback on queue $1.
SELECT count(*) FROM awa.leases l WHERE l.queue_id = awa.queue_id_of($1) AND l.state = 'waiting_external'
