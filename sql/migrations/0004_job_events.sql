-- What operators did to jobs (issue 12: `awa job retry|move|set-priority`, `awa dlq retry`),
-- for the timeline of `awa job show`. The engine's own history lives in the rings (ready,
-- done, claim rows); an operator's retry or move leaves there only a changed done row or a
-- tombstone, which tells neither when nor by what it happened. Written only by the admin
-- functions (sql/functions/0056_job_moves.sql), so it grows with operator actions, never
-- with traffic; not a ring, not read by claim, completion or counts.
CREATE TABLE {schema}.job_events (
    job_id        bigint      NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    event         text        NOT NULL CHECK (event IN ('retried_by_operator', 'moved')),
    attempt       smallint    NOT NULL DEFAULT 0,
    enqueue_shard smallint,
    detail        text        NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job_id ON {schema}.job_events (job_id, at);
