-- A snapshot of the rehearsal schema in the ledger schema, remade on every call:
--   found     each marker found in the schema's ready, deferred and DLQ entries, with its job
--   ready     a copy of ready_entries (the claim closures' success expansion joins it)
--   outcomes  every attempt end (job_id, run_lease, state)
--   jobs      the committed jobs: acknowledged by the producer, or found (an insert whose
--             answer was lost but whose commit happened), with found = its marker is in
--             the schema
-- Parameters: {schema} the rehearsal schema; {lschema} the ledger schema; {outcomes} the
-- query of the attempt ends (outcomes_closures.sql or outcomes_done_entries.sql); {qcol}
-- the lanes' queue column (queue_key_column.sql).
SET client_min_messages = warning;
DROP TABLE IF EXISTS {lschema}.found, {lschema}.ready, {lschema}.outcomes, {lschema}.jobs;
CREATE TABLE {lschema}.found AS
SELECT args->>'m' AS marker, job_id FROM {schema}.ready_entries WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM {schema}.deferred_jobs WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM {schema}.dlq_entries WHERE args ? 'm';
CREATE TABLE {lschema}.ready AS
SELECT {qcol}, priority, enqueue_shard, lane_seq, job_id, run_lease FROM {schema}.ready_entries;
CREATE INDEX ON {lschema}.ready ({qcol}, priority, enqueue_shard, lane_seq);
ANALYZE {lschema}.ready;
CREATE TABLE {lschema}.outcomes AS {outcomes};
CREATE INDEX ON {lschema}.outcomes (job_id);
-- committed jobs: acknowledged by the producer, or found (an unknown commit that happened)
CREATE TABLE {lschema}.jobs AS
SELECT l.marker, l.phase, l.kind, l.outcome, COALESCE(f.job_id, l.job_id) AS job_id,
       f.job_id IS NOT NULL AS found
FROM {lschema}.ledger l
LEFT JOIN (SELECT DISTINCT ON (marker) marker, job_id FROM {lschema}.found
           ORDER BY marker, job_id) f USING (marker)
WHERE l.outcome = 'acked' OR f.job_id IS NOT NULL;
CREATE INDEX ON {lschema}.jobs (job_id);
ANALYZE {lschema}.outcomes, {lschema}.jobs;
