-- Periodic (cron) jobs (issue 14, docs/scheduling.md): one row per named schedule.
--
-- The expression is parsed by the C++ side (src/storage/cron.cpp) into the sets below;
-- cron_next (sql/functions/0100_cron.sql) walks them in the schedule's time zone. An
-- @every schedule has every_seconds set and empty sets.
-- The maintenance leader fires due rows (fire_due_periodic, 0110_periodic.sql): each fire
-- is one compare-and-swap of next_fire_at together with the enqueue, in one transaction.
--   next_fire_at      the next occurrence not fired yet (NOT NULL: a schedule that can
--                     never fire again is refused when it is added);
--   last_fired_at     the latest occurrence fired; last_job_id its job;
--   source            'code' (declared by a Client at start-up) or 'cli' (awa cron add);
--   last_declared_at  when a Client last declared it (code only; stale detection);
--   last_error(_at)   the latest failed enqueue of a fire, cleared by the next success.
CREATE TABLE {schema}.periodic_jobs (
    name             text        PRIMARY KEY,
    expression       text        NOT NULL,
    tz               text        NOT NULL DEFAULT 'UTC',
    seconds          integer[]   NOT NULL,
    minutes          integer[]   NOT NULL,
    hours            integer[]   NOT NULL,
    doms             integer[]   NOT NULL,
    months           integer[]   NOT NULL,
    dows             integer[]   NOT NULL,
    dom_restricted   boolean     NOT NULL,
    dow_restricted   boolean     NOT NULL,
    every_seconds    bigint      CHECK (every_seconds > 0),
    kind             text        NOT NULL,
    queue            text        NOT NULL,
    args             jsonb       NOT NULL DEFAULT '{}'::jsonb,
    priority         smallint    NOT NULL DEFAULT 2,
    max_attempts     smallint    NOT NULL DEFAULT 25,
    tags             text[],
    metadata         jsonb,
    catch_up         boolean     NOT NULL DEFAULT false,
    paused           boolean     NOT NULL DEFAULT false,
    next_fire_at     timestamptz NOT NULL,
    last_fired_at    timestamptz,
    last_job_id      bigint,
    last_error       text,
    last_error_at    timestamptz,
    source           text        NOT NULL CHECK (source IN ('code', 'cli')),
    last_declared_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- The leader's probe each round: due, unpaused schedules.
CREATE INDEX periodic_jobs_due ON {schema}.periodic_jobs (next_fire_at) WHERE NOT paused;
