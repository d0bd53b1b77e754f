-- Job dependencies (docs/workflows.md, "Dependencies"): a job that runs only once every one
-- of its parents has ended. Tables: sql/migrations/0019_dependencies.sql.
--
-- A child is enqueued with the ids of jobs that exist (so no cycle can be built). Parents
-- its enqueue already sees ended are applied at once; each other parent gets a pending
-- edge, and the child waits in waiting_jobs with pending_parents = their number. When a
-- parent ends, whatever ended it applies its pending edges (resolve_parent_ends): one
-- probe of the pending-edge index and one row per child, whatever the number of the
-- child's other parents. The child whose last pending edge is applied is released: staged
-- (enqueue_staging, placed in its lane when that transaction commits) or, with a future
-- run_at, deferred. A parent that failed, was cancelled or was dead-lettered ends the
-- child at once under its policy 'cancel' (the default; its own children follow as
-- cancelled) or 'fail', and counts as done under 'run'.
--
-- Who applies a parent's end:
--   - close_attempts, for every end of an attempt (completed, failed, dlq, cancelled while
--     running), in the same transaction, after its batch locks;
--   - cancel_job, for a job cancelled while scheduled, available or waiting, under the
--     job's end lock (job_end_lock_key);
--   - end_waiting_jobs, for a waiting job its parents ended, under the same lock.
-- The race: a child's transaction saw a parent still live, and that parent ended and
-- looked for its edges before the child's transaction committed. The maintenance leader
-- closes it (verify_waiting_jobs): for every child committed since, once no ender holds
-- the parent's batch lock or end lock (a held one: the child is looked at again next
-- round), it reads the parent's state again and applies an end it finds. An ender that
-- takes those locks after that looks for the edges after the child committed, and finds
-- them. Applying an edge is idempotent (only
-- a pending edge is applied, under its row lock), so the leader and an ender that both
-- see one apply it once. models/dependency_release.pml checks the protocol.

-- The lock that serialises the ends of a job that has no open attempt (cancelled while
-- scheduled, available or waiting) with the leader's re-check of a waiting child's
-- parents. Two-int advisory keys, beside the attempts' batch locks.
CREATE OR REPLACE FUNCTION {schema}.job_end_lock_key(p_job_id bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT ((p_job_id & 4294967295) - 2147483648)::integer
$$;

-- Where a job is now, for the dependency code: job_states()'s state, or 'available' for a
-- job its caller's own transaction staged (placed at commit). state NULL: no trace of it.
-- claim_batch: the open attempt's batch, for a running job.
CREATE OR REPLACE FUNCTION {schema}.job_live_state(
    p_job_id bigint, OUT state text, OUT claim_batch bigint)
LANGUAGE plpgsql STABLE
SET jit = off AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.enqueue_staging s WHERE s.job_id = p_job_id) THEN
        state := 'available';
        RETURN;
    END IF;
    SELECT s.state, s.claim_batch INTO state, claim_batch
    FROM {schema}.job_states(p_job_id => p_job_id) s;
END
$$;

-- job_live_state for many jobs in one pass (the maintenance leader's re-check): one
-- job_states() scan for all of them, where a call per job would enumerate every open
-- attempt each time. A job with no trace has no row.
CREATE OR REPLACE FUNCTION {schema}.job_live_states(p_ids bigint[])
RETURNS TABLE (job_id bigint, state text, claim_batch bigint)
LANGUAGE plpgsql STABLE
SET jit = off AS $$
#variable_conflict use_column
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN;  -- job_states would still enumerate every open attempt
    END IF;
    RETURN QUERY
    SELECT s.job_id, 'available'::text, NULL::bigint
    FROM {schema}.enqueue_staging s WHERE s.job_id = ANY (p_ids)
    UNION ALL
    SELECT j.job_id, j.state, j.claim_batch
    FROM {schema}.job_states(p_job_ids => p_ids) j
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.enqueue_staging s WHERE s.job_id = j.job_id);
END
$$;

-- Releases waiting jobs whose parents are all done: due ones are staged (placed in their
-- lanes, and their queues notified, when this transaction commits), the others deferred
-- until their run_at. The caller holds their waiting_jobs rows locked.
CREATE OR REPLACE FUNCTION {schema}.release_waiting_jobs(p_ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM {schema}.waiting_jobs w WHERE w.job_id = ANY (p_ids) RETURNING w.*),
    later AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
             ordering_key, metadata, tags, reason)
        SELECT g.job_id, g.queue, g.priority, g.kind, g.args, g.max_attempts, g.run_at,
               g.created_at, g.ordering_key, g.metadata, g.tags, 'scheduled'
        FROM gone g
        WHERE g.run_at > now())
    INSERT INTO {schema}.enqueue_staging
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at, ordering_key,
         metadata, tags, fires)
    SELECT g.job_id, g.queue, g.priority, g.kind, g.args, g.max_attempts, g.run_at,
           g.created_at, g.ordering_key, g.metadata, g.tags,
           g.job_id = min(g.job_id) OVER ()
    FROM gone g
    WHERE g.run_at <= now();
END
$$;

-- Ends waiting jobs without running them (p_states: 'cancelled' or 'failed', with the
-- reason in p_errors), as a job cancelled while scheduled ends: its body kept on a ready
-- row at lane_seq = -job_id beside its done row, so it can be shown and retried. Its
-- other pending edges stop being pending. Takes each job's end lock, in id order, after
-- the caller locked its waiting_jobs row. The caller applies the ends to the jobs'
-- own children (resolve_parent_ends).
CREATE OR REPLACE FUNCTION {schema}.end_waiting_jobs(
    p_ids bigint[], p_states text[], p_errors text[])
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_slot smallint;
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('{schema}:job-end'), k.key)
    FROM (SELECT DISTINCT {schema}.job_end_lock_key(i) AS key FROM unnest(p_ids) i ORDER BY 1) k;
    v_slot := {schema}.ready_slot_for_write();
    WITH gone AS (
        DELETE FROM {schema}.waiting_jobs w WHERE w.job_id = ANY (p_ids) RETURNING w.*),
    ending AS MATERIALIZED (
        SELECT g.*, x.state, x.error, {schema}.ensure_queue_id(g.queue) AS queue_id
        FROM gone g
        JOIN unnest(p_ids, p_states, p_errors) AS x(id, state, error) ON x.id = g.job_id),
    body AS (
        INSERT INTO {schema}.ready_entries
            (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, kind, args,
             attempt, run_lease, max_attempts, run_at, created_at, ordering_key, metadata, tags)
        SELECT v_slot, e.queue_id, e.priority, 0, -e.job_id, e.job_id, e.kind, e.args, 0, 0,
               e.max_attempts, e.run_at, e.created_at, e.ordering_key, e.metadata, e.tags
        FROM ending e)
    INSERT INTO {schema}.done_entries
        (ready_slot, queue_id, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt,
         state, error)
    SELECT v_slot, e.queue_id, e.priority, 0, -e.job_id, e.job_id, 0, 0, e.state, e.error
    FROM ending e;
    UPDATE {schema}.job_dependencies d
    SET resolved_at = now()
    WHERE d.child_id = ANY (p_ids) AND d.resolved_at IS NULL;
END
$$;

-- Applies the ends of jobs (p_states[i] is p_ids[i]'s end: completed, failed, cancelled or
-- dlq; other states are ignored) to their pending edges, and what follows: children
-- released, children ended by their policy, and those children's ends to their own
-- children, until nothing more follows; then all those ends to the batches the jobs are
-- members of (apply_batch_ends). Returns the number of children released or ended.
CREATE OR REPLACE FUNCTION {schema}.resolve_parent_ends(p_ids bigint[], p_states text[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_ids     bigint[] := p_ids;
    v_states  text[]   := p_states;
    v_release bigint[];
    v_end     bigint[];
    v_end_as  text[];
    v_why     text[];
    v_n       integer := 0;
    v_all_ids    bigint[] := '{}';
    v_all_states text[] := '{}';
BEGIN
    WHILE coalesce(cardinality(v_ids), 0) > 0 LOOP
        v_all_ids := v_all_ids || v_ids;
        v_all_states := v_all_states || v_states;
        -- The children first, locked in id order: two enders with common children never
        -- deadlock on their rows.
        PERFORM 1
        FROM {schema}.waiting_jobs w
        WHERE w.job_id IN (SELECT d.child_id FROM {schema}.job_dependencies d
                           WHERE d.parent_id = ANY (v_ids) AND d.resolved_at IS NULL)
        ORDER BY w.job_id
        FOR UPDATE;

        WITH ended AS (
            SELECT DISTINCT ON (e.id) e.id, e.state
            FROM unnest(v_ids, v_states) AS e(id, state)
            WHERE e.state IN ('completed', 'failed', 'cancelled', 'dlq')
            ORDER BY e.id),
        -- only a pending edge is applied: a second ender of the same parent finds it
        -- applied (it waits for the first one's row lock, then re-checks)
        applied_edges AS (
            UPDATE {schema}.job_dependencies d
            SET parent_state = x.state, resolved_at = now()
            FROM ended x
            WHERE d.parent_id = x.id AND d.resolved_at IS NULL
            RETURNING d.child_id, d.parent_id, d.parent_state),
        per_child AS (
            SELECT a.child_id, count(*)::integer AS n,
                   min(a.parent_id) FILTER (WHERE a.parent_state <> 'completed') AS bad_parent,
                   (array_agg(a.parent_state ORDER BY a.parent_id)
                        FILTER (WHERE a.parent_state <> 'completed'))[1] AS bad_state
            FROM applied_edges a
            GROUP BY a.child_id),
        children AS (
            UPDATE {schema}.waiting_jobs w
            SET pending_parents = w.pending_parents - p.n
            FROM per_child p
            WHERE w.job_id = p.child_id
            RETURNING w.job_id, w.pending_parents, w.on_parent_failure, p.bad_parent, p.bad_state)
        SELECT array_agg(c.job_id ORDER BY c.job_id)
                   FILTER (WHERE c.pending_parents = 0
                             AND (c.bad_parent IS NULL OR c.on_parent_failure = 'run')),
               array_agg(c.job_id ORDER BY c.job_id)
                   FILTER (WHERE c.bad_parent IS NOT NULL AND c.on_parent_failure <> 'run'),
               array_agg(CASE c.on_parent_failure WHEN 'fail' THEN 'failed' ELSE 'cancelled' END
                         ORDER BY c.job_id)
                   FILTER (WHERE c.bad_parent IS NOT NULL AND c.on_parent_failure <> 'run'),
               array_agg(format('parent job %s %s', c.bad_parent,
                                CASE c.bad_state WHEN 'dlq' THEN 'was dead-lettered'
                                                 ELSE 'ended ' || c.bad_state END)
                         ORDER BY c.job_id)
                   FILTER (WHERE c.bad_parent IS NOT NULL AND c.on_parent_failure <> 'run')
        INTO v_release, v_end, v_end_as, v_why
        FROM children c;

        PERFORM {schema}.release_waiting_jobs(v_release);
        PERFORM {schema}.end_waiting_jobs(v_end, v_end_as, v_why);
        v_n := v_n + coalesce(cardinality(v_release), 0) + coalesce(cardinality(v_end), 0);
        v_ids := v_end;
        v_states := v_end_as;
    END LOOP;
    -- Every job end passes here, so the batches of all these jobs count them here too
    -- (0069_batches.sql; a member's first end only), their rows locked after the children's.
    PERFORM {schema}.apply_batch_ends(v_all_ids, v_all_states);
    RETURN v_n;
END
$$;

-- Enqueues a job that runs after the jobs p_after (1..1000 ids of existing jobs; repeats
-- count once). p_on_parent_failure: 'cancel' (default), 'run' or 'fail'. The other
-- parameters and their checks are insert_job_compat's. Returns the job's id and its state
-- now: 'waiting'; 'available' or 'scheduled' when every parent had already completed (an
-- available job is staged and placed when this transaction commits); 'cancelled' or
-- 'failed' when a parent had already failed and the policy is not 'run'.
-- A parent enqueued earlier in the same transaction (by any producer) is found.
-- Refusals: 22023 for a bad argument, 23503 (foreign_key_violation) for a parent that does
-- not exist; nothing is written then.
CREATE OR REPLACE FUNCTION {schema}.enqueue_after(
    p_after bigint[],
    p_on_parent_failure text,
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}'::jsonb,
    p_priority integer DEFAULT 2,
    p_max_attempts integer DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT NULL,
    p_tags text[] DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL,
    OUT id bigint,
    OUT state text)
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_policy    text := coalesce(p_on_parent_failure, 'cancel');
    v_now       timestamptz := now();
    v_parent    bigint;
    v_live      record;
    v_parents   integer := 0;
    v_ended     bigint[] := '{}';
    v_states    text[] := '{}';
BEGIN
    PERFORM {schema}.validate_job(p_kind, p_args, p_queue, p_priority, p_max_attempts, p_ordering_key);
    PERFORM {schema}.validate_job_extras(p_metadata, p_tags, p_run_at);
    IF v_policy NOT IN ('cancel', 'run', 'fail') THEN
        RAISE EXCEPTION 'unknown on_parent_failure policy "%" (expected cancel, run or fail)', v_policy
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_after), 0) = 0 THEN
        RAISE EXCEPTION 'a job enqueued after others needs at least one parent id' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_after) > 1000 THEN
        RAISE EXCEPTION '% parents; the limit is 1000', cardinality(p_after) USING ERRCODE = '22023';
    END IF;
    IF array_position(p_after, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'a parent id is NULL' USING ERRCODE = '22023';
    END IF;

    id := nextval('{schema}.job_ids');
    -- The parents' states: one that is staged, waiting or deferred is live, read by its key;
    -- the others in one job_states pass for them all (job_live_states).
    FOR v_live IN
        WITH parents AS (SELECT DISTINCT a AS id FROM unnest(p_after) AS a),
        known AS (
            SELECT p.id, 'available'::text AS state FROM parents p
            WHERE EXISTS (SELECT 1 FROM {schema}.enqueue_staging s WHERE s.job_id = p.id)
            UNION ALL
            SELECT p.id, 'waiting' FROM parents p
            WHERE EXISTS (SELECT 1 FROM {schema}.waiting_jobs w WHERE w.job_id = p.id)
            UNION ALL
            SELECT p.id, 'scheduled' FROM parents p
            WHERE EXISTS (SELECT 1 FROM {schema}.deferred_jobs d WHERE d.job_id = p.id)),
        rest AS (SELECT p.id FROM parents p WHERE p.id NOT IN (SELECT k.id FROM known k))
        SELECT p.id AS parent, coalesce(k.state, l.state) AS state
        FROM parents p
        LEFT JOIN (SELECT DISTINCT ON (k.id) k.* FROM known k ORDER BY k.id) k ON k.id = p.id
        LEFT JOIN {schema}.job_live_states(ARRAY(SELECT r.id FROM rest r)) l ON l.job_id = p.id
        ORDER BY p.id
    LOOP
        v_parent := v_live.parent;
        IF v_live.state IS NULL THEN
            RAISE EXCEPTION 'parent job % does not exist', v_parent
                USING ERRCODE = '23503',
                      HINT = 'A job can only be enqueued after jobs that were enqueued before it (or earlier in the same transaction).';
        END IF;
        INSERT INTO {schema}.job_dependencies (parent_id, child_id, on_parent_failure)
        VALUES (v_parent, id, v_policy);
        v_parents := v_parents + 1;
        IF v_live.state IN ('completed', 'failed', 'cancelled', 'dlq') THEN
            v_ended := v_ended || v_parent;
            v_states := v_states || v_live.state;
        END IF;
    END LOOP;

    -- Verified when no parent is live: nothing is left for the leader to re-check.
    INSERT INTO {schema}.waiting_jobs
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at, ordering_key,
         metadata, tags, on_parent_failure, pending_parents, verified)
    VALUES (id, p_queue, p_priority, p_kind, p_args, p_max_attempts, coalesce(p_run_at, v_now),
            v_now, p_ordering_key, p_metadata, p_tags, v_policy, v_parents,
            cardinality(v_ended) = v_parents);
    -- Parents that had already ended are applied as any parent's end is: the same release,
    -- or the same end under the policy.
    PERFORM {schema}.resolve_parent_ends(v_ended, v_states);

    IF EXISTS (SELECT 1 FROM {schema}.waiting_jobs w WHERE w.job_id = id) THEN
        state := 'waiting';
    ELSIF EXISTS (SELECT 1 FROM {schema}.enqueue_staging s WHERE s.job_id = id) THEN
        state := 'available';
    ELSIF EXISTS (SELECT 1 FROM {schema}.deferred_jobs d WHERE d.job_id = id) THEN
        state := 'scheduled';
    ELSE  -- ended by a parent that had failed (end_waiting_jobs)
        SELECT d.state INTO state
        FROM {schema}.done_entries d
        WHERE d.job_id = id AND d.lane_seq = -id;
    END IF;
END
$$;

-- The maintenance leader's re-check of waiting jobs committed since its last round (see
-- the race above), at most p_limit of them. First, holding no row lock, each pending
-- parent's state is read once no ender of it is in flight: its end lock and the batch lock
-- of its open attempt, each tried shared at session level and released at once (a free
-- lock is all that is needed: an ender that takes it later sees the edge). A parent whose
-- lock is held (a closer committing, or a handler's own transaction between complete_in
-- and its COMMIT) is not waited for: its children stay unverified until a later round, so
-- the leader's other work never waits behind a handler. Then the ends found are applied,
-- and the other jobs marked verified. Returns the number of jobs checked (those left for a
-- later round not counted).
CREATE OR REPLACE FUNCTION {schema}.verify_waiting_jobs(p_limit integer)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_children bigint[];
    v_parents  bigint[];
    v_free     bigint[] := '{}';
    v_running  bigint[] := '{}';
    v_parent   bigint;
    v_live     record;
    v_ended    bigint[] := '{}';
    v_states   text[] := '{}';
    v_busy     bigint[] := '{}';
    v_n        integer;
BEGIN
    SELECT array_agg(w.job_id ORDER BY w.job_id) INTO v_children
    FROM (SELECT w.job_id FROM {schema}.waiting_jobs w
          WHERE NOT w.verified ORDER BY w.job_id LIMIT p_limit) w;
    IF v_children IS NULL THEN
        RETURN 0;
    END IF;
    SELECT array_agg(DISTINCT d.parent_id ORDER BY d.parent_id) INTO v_parents
    FROM {schema}.job_dependencies d
    WHERE d.child_id = ANY (v_children) AND d.resolved_at IS NULL;
    -- Each parent's end lock, tried and released: a held one means an ender is in flight.
    FOREACH v_parent IN ARRAY coalesce(v_parents, '{}') LOOP
        IF pg_try_advisory_lock_shared(hashtext('{schema}:job-end'), {schema}.job_end_lock_key(v_parent)) THEN
            PERFORM pg_advisory_unlock_shared(hashtext('{schema}:job-end'), {schema}.job_end_lock_key(v_parent));
            v_free := v_free || v_parent;
        ELSE
            v_busy := v_busy || v_parent;
        END IF;
    END LOOP;
    -- Their states in one pass (a new statement, after the locks were seen free); a running
    -- parent's batch lock is tried the same way, and its state read again afterwards.
    FOR v_live IN SELECT * FROM {schema}.job_live_states(v_free) LOOP
        IF v_live.claim_batch IS NOT NULL THEN
            IF pg_try_advisory_lock_shared(hashtext('{schema}:attempts'),
                                           {schema}.attempt_lock_key(v_live.claim_batch)) THEN
                PERFORM pg_advisory_unlock_shared(hashtext('{schema}:attempts'),
                                                  {schema}.attempt_lock_key(v_live.claim_batch));
                v_running := v_running || v_live.job_id;
            ELSE
                v_busy := v_busy || v_live.job_id;
            END IF;
        END IF;
    END LOOP;
    -- a new statement: its snapshot shows what the closers of the running ones committed
    SELECT array_agg(p.id ORDER BY p.id), array_agg(p.state ORDER BY p.id)
    INTO v_ended, v_states
    FROM (SELECT f.id,
                 -- No trace at all: an ended job whose history was pruned. Failures keep
                 -- their rows for the failed-job retention, so such a job completed.
                 coalesce(l.state, 'completed') AS state
          FROM unnest(v_free) AS f(id)
          LEFT JOIN {schema}.job_live_states(v_free) l ON l.job_id = f.id
          WHERE f.id <> ALL (v_busy)) p
    WHERE p.state IN ('completed', 'failed', 'cancelled', 'dlq');
    PERFORM {schema}.resolve_parent_ends(v_ended, v_states);
    SELECT count(DISTINCT d.child_id) INTO v_n
    FROM {schema}.job_dependencies d
    WHERE d.child_id = ANY (v_children) AND d.resolved_at IS NULL AND d.parent_id = ANY (v_busy);
    UPDATE {schema}.waiting_jobs w SET verified = true
    WHERE w.job_id = ANY (v_children) AND NOT w.verified
      AND NOT EXISTS (SELECT 1 FROM {schema}.job_dependencies d
                      WHERE d.child_id = w.job_id AND d.resolved_at IS NULL
                        AND d.parent_id = ANY (v_busy));
    RETURN cardinality(v_children) - v_n;
END
$$;

-- A job's dependencies, for job_detail: {"on_parent_failure": policy, "pending_parents": n
-- (while it waits), "parents": [{"id", "state"}], "children": [{"id", "state"}]}, where a
-- parent's state is its applied end, or its live state while the edge is pending, and a
-- child's is its state now. NULL for a job with neither parents nor children retained.
CREATE OR REPLACE FUNCTION {schema}.job_dependencies_json(p_job_id bigint)
RETURNS jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    WITH parents AS (
        SELECT d.parent_id AS id, d.on_parent_failure,
               coalesce(d.parent_state, (SELECT s.state FROM {schema}.job_live_state(d.parent_id) s)) AS state
        FROM {schema}.job_dependencies d
        WHERE d.child_id = p_job_id),
    children AS (
        SELECT d.child_id AS id,
               (SELECT s.state FROM {schema}.job_live_state(d.child_id) s) AS state
        FROM {schema}.job_dependencies d
        WHERE d.parent_id = p_job_id)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM parents) OR EXISTS (SELECT 1 FROM children) THEN
        jsonb_strip_nulls(jsonb_build_object(
            'on_parent_failure', (SELECT min(p.on_parent_failure) FROM parents p),
            'pending_parents', (SELECT w.pending_parents FROM {schema}.waiting_jobs w
                                WHERE w.job_id = p_job_id)))
        || jsonb_build_object(
            'parents', coalesce((SELECT jsonb_agg(jsonb_build_object('id', p.id, 'state', p.state)
                                                  ORDER BY p.id) FROM parents p), '[]'::jsonb),
            'children', coalesce((SELECT jsonb_agg(jsonb_build_object('id', c.id, 'state', c.state)
                                                   ORDER BY c.id) FROM children c), '[]'::jsonb))
    END
$$;

-- The results of a job's parents that completed with one: (parent id, result), for
-- JobContext::parent_results(). A parent without a result, or whose history was pruned,
-- has no row.
CREATE OR REPLACE FUNCTION {schema}.parent_results(p_job_id bigint)
RETURNS TABLE (parent_id bigint, result jsonb)
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT d.parent_id, r.result
    FROM {schema}.job_dependencies d
    CROSS JOIN LATERAL (
        SELECT x.result FROM {schema}.done_entries x
        WHERE x.job_id = d.parent_id AND x.state = 'completed' AND x.result IS NOT NULL
        ORDER BY x.finished_at DESC
        LIMIT 1) AS r
    WHERE d.child_id = p_job_id AND d.parent_state = 'completed'
    ORDER BY d.parent_id
$$;

-- The leader's retention of dependency edges: edges applied before p_keep ago whose
-- child no longer waits. Returns the number deleted.
CREATE OR REPLACE FUNCTION {schema}.purge_dependencies(p_keep interval, p_limit integer DEFAULT 10000)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n integer;
BEGIN
    DELETE FROM {schema}.job_dependencies d
    WHERE (d.parent_id, d.child_id) IN (
        SELECT x.parent_id, x.child_id FROM {schema}.job_dependencies x
        WHERE x.resolved_at < now() - p_keep
          AND NOT EXISTS (SELECT 1 FROM {schema}.waiting_jobs w WHERE w.job_id = x.child_id)
        LIMIT p_limit);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
