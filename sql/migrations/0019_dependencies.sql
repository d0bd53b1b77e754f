-- Job dependencies (sql/functions/0067_dependencies.sql, docs/workflows.md).
--
-- A job enqueued with parents waits here, outside the rings, until every parent has ended:
-- it is written once and deleted once, and nothing about it touches a ready lane until it
-- is released. The edges record each parent of each such job; a parent's end resolves its
-- edges, so the work per parent end is one probe of the pending-edge index plus one row
-- per child.

CREATE TABLE {schema}.waiting_jobs (
    job_id            bigint      PRIMARY KEY,
    queue             text        NOT NULL,
    priority          smallint    NOT NULL,
    kind              text        NOT NULL,
    args              jsonb       NOT NULL,
    max_attempts      smallint    NOT NULL,
    -- not before this time once released (a scheduled child)
    run_at            timestamptz NOT NULL,
    created_at        timestamptz NOT NULL,
    ordering_key      bytea,
    metadata          jsonb,
    tags              text[],
    -- what a parent that failed, was cancelled or was dead-lettered does to this job
    on_parent_failure text        NOT NULL DEFAULT 'cancel'
                      CHECK (on_parent_failure IN ('cancel', 'run', 'fail')),
    -- parents whose end has not been applied yet
    pending_parents   integer     NOT NULL CHECK (pending_parents >= 0),
    -- false until the maintenance leader has re-read, after this job's transaction
    -- committed, the parents it found running: a parent that ended while that transaction
    -- was open may have looked for its edges before they were visible.
    verified          boolean     NOT NULL DEFAULT false
);
CREATE INDEX waiting_jobs_unverified ON {schema}.waiting_jobs (job_id) WHERE NOT verified;
CREATE INDEX waiting_jobs_queue ON {schema}.waiting_jobs (queue);

-- One row per (parent, child). parent_state is the parent's end once it is known
-- (completed, failed, cancelled, dlq); resolved_at is set when the edge stops being
-- pending: the parent's end was applied, or the child ended first (then parent_state may
-- stay NULL). Kept after the child ran, for `awa job show` and the child's
-- parent_results(), and deleted by the maintenance leader after the retention.
CREATE TABLE {schema}.job_dependencies (
    parent_id    bigint      NOT NULL,
    child_id     bigint      NOT NULL,
    parent_state text        CHECK (parent_state IN ('completed', 'failed', 'cancelled', 'dlq')),
    -- the child's policy, kept here for display once the child has left waiting_jobs
    on_parent_failure text   NOT NULL CHECK (on_parent_failure IN ('cancel', 'run', 'fail')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX job_dependencies_child ON {schema}.job_dependencies (child_id);
-- What a closer probes: empty while no dependency is pending, so a completion flush of
-- plain jobs pays one probe of an empty index.
CREATE INDEX job_dependencies_pending ON {schema}.job_dependencies (parent_id)
    WHERE resolved_at IS NULL;
CREATE INDEX job_dependencies_resolved_at ON {schema}.job_dependencies (resolved_at)
    WHERE resolved_at IS NOT NULL;
