-- $1 queue: its limits (migration 0009; NULL when unset or the queue has no queue_meta
-- row) and whether it has an available row now. The dispatcher reads this every couple
-- of seconds, and after a limited queue's claim came back empty, to decide how soon to
-- claim again (src/runtime/dispatcher.cpp). burst is not needed there: the wait for the
-- next token depends on max_rate alone.
SELECT m.max_rate, m.global_max_workers,
       EXISTS (SELECT 1 FROM {schema}.available_rows($1::text)) AS backlog
FROM (SELECT $1::text AS queue) AS q
LEFT JOIN {schema}.queue_meta m ON m.queue = q.queue
