-- Jobs enqueued inside a caller's transaction wait here until that transaction commits;
-- a deferred constraint trigger (place_staged_jobs, sql/functions/0032_enqueue_staging.sql)
-- then reserves their lanes, in the global lock order, and writes them to ready_entries.
--
-- Why: a lane's lock is held from its reservation to the end of the transaction. When a
-- transaction reserved lanes at each enqueue call, two transactions making several calls
-- could take lanes in crossing order and deadlock (40P01): an order handler enqueuing one
-- job per line at enqueue_shards > 1, or two ordering keys on different shards. Reserving
-- every lane of the transaction at once, sorted, at commit, makes any sequence of calls
-- deadlock-free, and the lanes are held only for the commit itself.
--
-- UNLOGGED: a row lives only inside its own transaction (written, then moved out and
-- deleted before that transaction's commit), so nothing here needs to survive a crash.
-- `fires` marks the rows that queue a trigger event (the first row of each call): one
-- event places all of the transaction's rows, the others would find nothing left.
CREATE UNLOGGED TABLE {schema}.enqueue_staging (
    xact          xid8        NOT NULL DEFAULT pg_current_xact_id()
                              CHECK (xact = pg_current_xact_id()),
    job_id        bigint      NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    kind          text        NOT NULL,
    args          jsonb       NOT NULL,
    max_attempts  smallint    NOT NULL,
    run_at        timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    ordering_key  bytea,
    metadata      jsonb,
    tags          text[],
    fires         boolean     NOT NULL DEFAULT true
);
CREATE INDEX enqueue_staging_xact ON {schema}.enqueue_staging (xact, queue, priority);
