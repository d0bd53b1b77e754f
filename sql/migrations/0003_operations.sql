-- Operator surface (issue 12, docs/operations.md): queue settings an operator configures,
-- a registry of running workers for `awa health`, and cheap lookups of a job by id.

-- Queue settings beyond the shard count. NULL: the worker's own setting applies.
--   deadline_ms       hard deadline of each claimed attempt (rescued after it);
--   max_workers_hint  informational: how many workers the operator means to run for the
--                     queue (shown by stats and the dashboard; nothing enforces it).
ALTER TABLE {schema}.queue_meta
    ADD COLUMN deadline_ms bigint CONSTRAINT queue_meta_deadline_ms_check CHECK (deadline_ms > 0),
    ADD COLUMN max_workers_hint integer
        CONSTRAINT queue_meta_max_workers_hint_check CHECK (max_workers_hint BETWEEN 1 AND 100000);

-- One row per running `awa work` / Client process, upserted by its control thread every
-- few seconds and deleted at a clean stop. last_seen_at tells `awa health` which workers
-- are alive; is_leader / leader_tick_at which one runs maintenance and when it last did.
-- Unlogged: it is a liveness signal, rebuilt within seconds after a crash, and its
-- updates should cost no WAL.
CREATE UNLOGGED TABLE {schema}.runtime_instances (
    instance_id    uuid        PRIMARY KEY,
    hostname       text        NOT NULL,
    pid            integer     NOT NULL,
    queues         text[]      NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    is_leader      boolean     NOT NULL DEFAULT false,
    leader_tick_at timestamptz
) WITH (fillfactor = 50);

-- Finding a job by id (job show, retry, move, cancel) without reading every ready row.
-- BRIN, not B-tree: job ids are handed out in ascending blocks, so rows arrive in nearly
-- ascending id order and a BRIN summary is small and almost free to maintain on the
-- enqueue hot path, where a B-tree would add a random-access index insert per row.
CREATE INDEX ready_entries_job_id ON {schema}.ready_entries USING brin (job_id);
CREATE INDEX done_entries_job_id ON {schema}.done_entries USING brin (job_id);
