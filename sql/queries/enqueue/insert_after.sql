-- One job enqueued after its parents (InsertOpts::after; enqueue_after in
-- sql/functions/0067_dependencies.sql): it waits, or is released at once when every
-- parent had already ended. Returns its id and its state now.
SELECT e.id, e.state
FROM {schema}.enqueue_after(
    p_after => $1::bigint[], p_on_parent_failure => $2::text, p_kind => $3::text,
    p_queue => $4::text, p_args => $5::jsonb, p_priority => $6::integer,
    p_max_attempts => $7::integer, p_run_at => $8::timestamptz, p_metadata => $9::jsonb,
    p_tags => $10::text[], p_ordering_key => $11::bytea) e
