-- Batches and follow-up jobs (sql/functions/0069_batches.sql, docs/workflows.md).
--
-- A batch is a named set of jobs with an optional completion job, enqueued once every
-- member has ended after the batch was sealed. Members are recorded beside the jobs,
-- outside the rings, one row each: written with the job, updated once when it ends.

CREATE TABLE {schema}.batches (
    batch_id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL UNIQUE,
    -- the completion job: its kind (none: the batch only counts), queue and base args
    on_complete_kind text,
    queue            text        NOT NULL DEFAULT 'default',
    on_complete_args jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- set once; no member is added after it
    sealed_at        timestamptz,
    -- the number of members, counted when the batch is sealed (before: counted live)
    members          bigint      NOT NULL DEFAULT 0,
    completed        bigint      NOT NULL DEFAULT 0,
    -- failed or dead-lettered
    failed           bigint      NOT NULL DEFAULT 0,
    cancelled        bigint      NOT NULL DEFAULT 0,
    -- when every member of the sealed batch had ended, and the completion job then enqueued
    finished_at      timestamptz,
    completion_job   bigint
);
CREATE INDEX batches_finished_at ON {schema}.batches (finished_at) WHERE finished_at IS NOT NULL;

-- One row per member job. state is the job's first end (completed, failed, cancelled,
-- dlq), NULL while it has not ended; a member retried after its end is not counted again.
CREATE TABLE {schema}.batch_members (
    job_id     bigint      PRIMARY KEY,
    batch_id   bigint      NOT NULL REFERENCES {schema}.batches (batch_id) ON DELETE CASCADE,
    state      text        CHECK (state IN ('completed', 'failed', 'cancelled', 'dlq')),
    ended_at   timestamptz
);
CREATE INDEX batch_members_batch ON {schema}.batch_members (batch_id, job_id);
-- What a closer probes: empty while no member of any batch is pending.
CREATE INDEX batch_members_pending ON {schema}.batch_members (job_id) WHERE state IS NULL;

-- Jobs a queue enqueues when one of its jobs completes, or ends failed after its last
-- attempt (failed or dead-lettered): at most one of each per queue.
CREATE TABLE {schema}.queue_follow_ups (
    queue        text        NOT NULL,
    trigger      text        NOT NULL CHECK (trigger IN ('completed', 'exhausted')),
    kind         text        NOT NULL,
    target_queue text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, trigger)
);
