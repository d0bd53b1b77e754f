-- Promotion of due deferred jobs (scheduled, retry backoff, snoozed) back to ready
-- (the maintenance leader's round). Routed like any enqueue with the queue's *current* shard count, so
-- promoted rows land on shards [0, S) even after S was lowered: keyed rows by the
-- ordering-key hash, unkeyed rows by one rotor pick per (queue, priority). Lanes are
-- reserved in ascending (queue, priority, enqueue_shard) order, the global lock order.
-- Due rows are taken FOR UPDATE SKIP LOCKED, so concurrent promoters split the work.
-- Job id, attempt, run_lease, errors and created_at carry over; run_at stays the due
-- time, which keeps claim-side fairness and aging honest.
--
-- promote_deferred(p_limit, p_job_ids): the promotion; p_job_ids NULL promotes any due
-- jobs, otherwise only due jobs among those ids (release_attempts hands back jobs this
-- way at once, without waiting for the leader's round).
-- promote_due_deferred(p_limit): what the maintenance leader calls.
CREATE OR REPLACE FUNCTION {schema}.promote_deferred(p_limit integer, p_job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_lane record;
    v_seq  bigint;
    v_slot smallint;
    v_n    integer;
    v_qid  integer;
BEGIN
    -- The leader calls this every round; most rounds nothing is due. Creating and dropping
    -- the temp table costs catalog writes (and catalog bloat) each time, so look first —
    -- one probe of deferred_jobs_run_at.
    IF p_job_ids IS NULL AND NOT EXISTS (SELECT 1 FROM {schema}.deferred_jobs x
                                         WHERE x.run_at <= now()) THEN
        RETURN 0;
    END IF;
    CREATE TEMP TABLE IF NOT EXISTS awa_promote_batch (
        job_id bigint, queue text, priority smallint, kind text, args jsonb,
        attempt smallint, run_lease bigint, max_attempts smallint, run_at timestamptz,
        created_at timestamptz, ordering_key bytea, metadata jsonb, tags text[],
        errors jsonb, shard integer) ON COMMIT DROP;
    TRUNCATE awa_promote_batch;

    WITH due AS (
        DELETE FROM {schema}.deferred_jobs d
        WHERE d.job_id IN (SELECT x.job_id FROM {schema}.deferred_jobs x
                           WHERE x.run_at <= now()
                             AND (p_job_ids IS NULL OR x.job_id = ANY (p_job_ids))
                           ORDER BY x.run_at
                           LIMIT p_limit
                           FOR UPDATE SKIP LOCKED)
        RETURNING d.*)
    INSERT INTO awa_promote_batch
    SELECT job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
           created_at, ordering_key, metadata, tags, errors, NULL
    FROM due;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 THEN
        RETURN 0;
    END IF;

    -- Keyed rows: the reshard locks before the counts are read (0022_shard_fences.sql).
    PERFORM {schema}.hold_shard_counts(ARRAY(SELECT DISTINCT b.queue FROM awa_promote_batch b
                                             WHERE b.ordering_key IS NOT NULL));
    UPDATE awa_promote_batch b
    SET shard = CASE WHEN s.shards = 1 THEN 0
                     WHEN b.ordering_key IS NOT NULL
                         THEN {schema}.shard_for_ordering_key(b.ordering_key, s.shards)
                     ELSE s.pick END
    FROM (SELECT q.queue, q.priority, q.shards,
                 (nextval('{schema}.compat_rotor') % q.shards)::integer AS pick
          FROM (SELECT DISTINCT queue, priority, {schema}.queue_shard_count(queue) AS shards
                FROM awa_promote_batch) q) s
    WHERE s.queue = b.queue AND s.priority = b.priority;

    FOR v_lane IN
        SELECT b.queue, b.priority, b.shard, count(*) AS n
        FROM awa_promote_batch b
        GROUP BY b.queue, b.priority, b.shard
        ORDER BY b.queue COLLATE "C", b.priority, b.shard
    LOOP
        SELECT r.first_seq, r.ready_slot, r.queue_id INTO v_seq, v_slot, v_qid
        FROM {schema}.reserve_lane_range(v_lane.queue, v_lane.priority, v_lane.shard, v_lane.n::integer) r;
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args, attempt,
             run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags, errors)
        SELECT v_slot,
               v_qid, b.priority, b.shard,
               v_seq + row_number() OVER (ORDER BY b.run_at, b.job_id) - 1,
               b.job_id, b.kind, b.args, b.attempt, b.run_lease, b.max_attempts, b.run_at,
               b.created_at, b.ordering_key, b.metadata, b.tags, b.errors
        FROM awa_promote_batch b
        WHERE b.queue = v_lane.queue AND b.priority = v_lane.priority AND b.shard = v_lane.shard;
        PERFORM pg_notify({schema}.notify_channel(v_lane.queue), '');
    END LOOP;
    RETURN v_n;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.promote_due_deferred(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE sql
AS $$ SELECT {schema}.promote_deferred(p_limit, NULL) $$;
