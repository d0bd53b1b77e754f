-- Queue administration (issue 12; include/awa/admin.hpp, `awa queue list|stats`).

-- The run_at of the queue's oldest available job (committed, unclaimed, not cancelled:
-- the rows queue_counts_exact counts as available), NULL when none is. Exact: it reads
-- every available row, since a promoted or retried job may carry an older run_at than
-- the rows ahead of it in its lane.
CREATE OR REPLACE FUNCTION {schema}.queue_oldest_available(p_queue text)
RETURNS timestamptz
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT min(r.run_at) FROM {schema}.available_rows(p_queue) r
$$;

-- Every queue the schema knows — one with a queue_meta row, a lane, a deferred job or a
-- dead letter — by name; or, with p_queue, that queue alone (no row when it is unknown).
-- Per queue: its settings (queue_meta's defaults when it has no row; configured says
-- whether it has one), its exact counts (queue_counts_exact) and the age in seconds of
-- its oldest available job. The rings are locked first (lock_rings_shared: a prune
-- committing meanwhile is seen whole), then one statement reads, and the functions it
-- calls are STABLE, so every number comes from one snapshot: no job is counted twice, or
-- in two states, when it moves while the listing runs.
DROP FUNCTION IF EXISTS {schema}.queue_overview(text);
CREATE OR REPLACE FUNCTION {schema}.queue_overview(p_queue text DEFAULT NULL)
RETURNS TABLE (queue text, configured boolean, enqueue_shards smallint, paused boolean,
               dlq_enabled boolean, priority_aging_ms bigint, deadline_ms bigint,
               max_workers_hint integer, available bigint, running bigint, scheduled bigint,
               retryable bigint, completed bigint, failed bigint, cancelled bigint,
               dlq bigint, oldest_available_age_s double precision, waiting bigint)
LANGUAGE plpgsql VOLATILE
SET jit = off AS $$
#variable_conflict use_column
BEGIN
    PERFORM {schema}.lock_rings_shared(ARRAY['queue', 'claim']);
    RETURN QUERY
    WITH known AS (
        -- One queue: stop at the first trace of it (each is a constant-time probe but
        -- deferred_jobs, which has no index on queue).
        SELECT p_queue AS queue
        WHERE p_queue IS NOT NULL
          AND (EXISTS (SELECT 1 FROM {schema}.queue_meta m WHERE m.queue = p_queue)
               OR EXISTS (SELECT 1 FROM {schema}.queue_claim_heads h
                          WHERE h.queue_id = {schema}.queue_id_of(p_queue))
               OR EXISTS (SELECT 1 FROM {schema}.dlq_entries d WHERE d.queue = p_queue)
               OR EXISTS (SELECT 1 FROM {schema}.deferred_jobs j WHERE j.queue = p_queue)
               OR EXISTS (SELECT 1 FROM {schema}.waiting_jobs w WHERE w.queue = p_queue))
        UNION ALL
        SELECT q.queue
        FROM (SELECT m.queue FROM {schema}.queue_meta m
              UNION SELECT i.queue FROM {schema}.queue_claim_heads h
                    JOIN {schema}.queue_ids i ON i.queue_id = h.queue_id
              UNION SELECT d.queue FROM {schema}.dlq_entries d
              UNION SELECT j.queue FROM {schema}.deferred_jobs j
              UNION SELECT w.queue FROM {schema}.waiting_jobs w) AS q
        WHERE p_queue IS NULL)
    SELECT k.queue, m.queue IS NOT NULL,
           coalesce(m.enqueue_shards, 1::smallint), coalesce(m.paused, false),
           coalesce(m.dlq_enabled, false), m.priority_aging_ms, m.deadline_ms,
           m.max_workers_hint,
           c.available, c.running, c.scheduled, c.retryable, c.completed, c.failed,
           c.cancelled, c.dlq,
           -- greatest() ignores NULLs: no available job must stay NULL, not 0.
           CASE WHEN o.run_at IS NOT NULL
                THEN greatest(0, extract(epoch FROM now() - o.run_at))::double precision END,
           c.waiting
    FROM known k
    LEFT JOIN {schema}.queue_meta m ON m.queue = k.queue
    CROSS JOIN LATERAL {schema}.queue_counts_unlocked(k.queue) AS c
    CROSS JOIN LATERAL {schema}.queue_oldest_available(k.queue) AS o(run_at)
    ORDER BY k.queue COLLATE "C";
END
$$;
