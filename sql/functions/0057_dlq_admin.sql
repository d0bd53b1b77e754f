-- Dead-letter triage (issue 12: `awa dlq retry|purge`). A selection is every dead letter
-- matching all the filters given: job id, queue, kind, dead-lettered longer ago than
-- p_older_than. With no filter at all, p_all must say so: emptying the DLQ is never the
-- default (SQLSTATE 22023 otherwise, nothing changed).

CREATE OR REPLACE FUNCTION {schema}.check_dlq_selection(
    p_id bigint, p_queue text, p_kind text, p_older_than interval, p_all boolean, p_action text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_id IS NULL AND p_queue IS NULL AND p_kind IS NULL AND p_older_than IS NULL
       AND NOT coalesce(p_all, false) THEN
        RAISE EXCEPTION 'refusing to % every dead letter without a filter', p_action
            USING ERRCODE = '22023',
                  HINT = 'name a job id, a queue, a kind or an age, or say all';
    END IF;
    IF p_older_than < interval '0' THEN
        RAISE EXCEPTION 'the age of dead letters to select must not be negative' USING ERRCODE = '22023';
    END IF;
END
$$;

-- Moves the selected dead letters back to ready in one transaction: each dlq row is
-- deleted and its job promoted through deferred_jobs (promote_deferred, so it lands on the
-- queue's current shards) with its attempt count reset, its errors and run_lease kept.
-- The dlq row's lock orders concurrent retries and purges: a row is retried or purged
-- once. Returns the ids, ascending.
CREATE OR REPLACE FUNCTION {schema}.retry_dlq_entries(
    p_id bigint, p_queue text, p_kind text, p_older_than interval, p_all boolean)
RETURNS bigint[]
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_ids bigint[];
BEGIN
    PERFORM {schema}.check_dlq_selection(p_id, p_queue, p_kind, p_older_than, p_all, 'retry');
    PERFORM {schema}.lock_job_admin();
    WITH gone AS (
        DELETE FROM {schema}.dlq_entries d
        WHERE (p_id IS NULL OR d.job_id = p_id)
          AND (p_queue IS NULL OR d.queue = p_queue)
          AND (p_kind IS NULL OR d.kind = p_kind)
          AND (p_older_than IS NULL OR d.dlq_at < now() - p_older_than)
        RETURNING d.*),
    requeued AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, run_lease, max_attempts, run_at,
             created_at, ordering_key, metadata, tags, errors, reason)
        SELECT g.job_id, g.queue, g.priority, g.kind, g.args, 0, g.run_lease, g.max_attempts,
               now(), g.created_at, g.ordering_key, g.metadata, g.tags, g.errors, 'scheduled'
        FROM gone g
        RETURNING job_id),
    noted AS (
        INSERT INTO {schema}.job_events (job_id, event, attempt, detail)
        SELECT g.job_id, 'retried_by_operator', g.attempt, 'from the dlq (' || g.reason || ')'
        FROM gone g)
    SELECT array_agg(q.job_id ORDER BY q.job_id) INTO v_ids FROM requeued q;
    IF v_ids IS NULL THEN
        RETURN '{}'::bigint[];
    END IF;
    PERFORM {schema}.promote_deferred(cardinality(v_ids), v_ids);
    RETURN v_ids;
END
$$;

-- Deletes the selected dead letters; returns how many. (purge_dlq(interval) is the
-- maintenance leader's retention.)
CREATE OR REPLACE FUNCTION {schema}.purge_dlq_entries(
    p_id bigint, p_queue text, p_kind text, p_older_than interval, p_all boolean)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n bigint;
BEGIN
    PERFORM {schema}.check_dlq_selection(p_id, p_queue, p_kind, p_older_than, p_all, 'purge');
    DELETE FROM {schema}.dlq_entries d
    WHERE (p_id IS NULL OR d.job_id = p_id)
      AND (p_queue IS NULL OR d.queue = p_queue)
      AND (p_kind IS NULL OR d.kind = p_kind)
      AND (p_older_than IS NULL OR d.dlq_at < now() - p_older_than);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
