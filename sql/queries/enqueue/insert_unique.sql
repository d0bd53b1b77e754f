-- One unique job (InsertOpts::unique), through insert_job_compat's p_unique: the key is
-- computed and claimed in SQL (sql/functions/0025_unique.sql), then, unless an equal job
-- holds it, the job is enqueued by the SQL producer's routing (same lanes and shards as
-- the C++ producer). Returns the job's id, or the existing job's id and duplicate = true.
SELECT c.id, c.duplicate
FROM {schema}.insert_job_compat(
    p_kind => $1::text, p_queue => $2::text, p_args => $3::jsonb, p_priority => $4::integer,
    p_max_attempts => $5::integer, p_run_at => $6::timestamptz, p_metadata => $7::jsonb,
    p_tags => $8::text[], p_ordering_key => $9::bytea, p_unique => $10::jsonb) c
