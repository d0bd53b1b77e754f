-- chaos.found: each marker's job as the database holds it (first ready row, deferred or DLQ
-- row; rotation is off, so nothing is pruned); marks unknown commits found there committed.
CREATE TABLE chaos.found AS
SELECT args->>'m' AS marker, job_id FROM awa.ready_entries WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM awa.deferred_jobs WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM awa.dlq_entries WHERE args ? 'm';
CREATE INDEX ON chaos.found (marker);
UPDATE chaos.ledger l SET committed = true
WHERE l.unknown AND EXISTS (SELECT 1 FROM chaos.found f WHERE f.marker = l.marker)
