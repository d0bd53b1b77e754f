-- One producer insert (scripts/lib/rehearsal/producer.py), sent per job on the producer's
-- psql session: enqueues one job through insert_job_compat with named arguments (their
-- order differs between releases), prints 'ack', the marker and the new job's row, then
-- the line "end|MARKER" that tells the producer the answer is complete.
-- Parameters: {schema} the rehearsal schema; {kind}, {queue}; {args} the job's args as
-- JSON (holding its marker); {attempts} max attempts; {ordering_key} empty or
-- ", p_ordering_key => ..."; {marker} the job's unique marker.
SELECT 'ack', '{marker}', x.* FROM {schema}.insert_job_compat(p_kind => '{kind}', p_queue => '{queue}', p_args => '{args}'::jsonb, p_max_attempts => {attempts}{ordering_key}) x;
\echo end|{marker}
