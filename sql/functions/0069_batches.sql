-- Batches and follow-up jobs (docs/workflows.md). Tables: sql/migrations/0020_batches.sql.
--
-- A batch is opened by name, filled with member jobs over any number of transactions, and
-- sealed. When every member of a sealed batch has ended, its completion job (if it has one)
-- is enqueued, exactly once, with the counts of completed, failed and cancelled members.
--
-- The rule (models/batch_completion.pml, docs/correctness.md I9), on the batch row:
--   - a producer adds members under a KEY SHARE lock of the row, refused once the batch is
--     sealed. Producers do not block each other, nor the members' ends;
--   - sealing takes the row's exclusive lock (so it waits for every producer that is
--     adding members to commit or roll back), then, in a new statement that sees what they
--     committed, counts the members and sets sealed_at. No member is added after that;
--   - a member's end adds 1 to a counter by an UPDATE of the row (a NO KEY UPDATE lock,
--     which waits for a sealer but not for producers) in the transaction that ends it;
--   - whichever of these UPDATEs leaves the row sealed with every member ended — read from
--     the row it wrote, under its lock — finishes the batch in the same transaction; the
--     UPDATE that marks it finished is guarded (finished_at IS NULL).
-- Who applies a member's end: resolve_parent_ends, which every job end goes through when a
-- member is pending anywhere (close_attempts, cancel_job, the ends of waiting jobs).

-- A batch name: 1..200 characters from A-Z a-z 0-9 _ . : - (as a queue name), so it can
-- stand in a URL and a shell argument unquoted.
CREATE OR REPLACE FUNCTION {schema}.check_batch_name(p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid batch name "%": use 1..200 characters from A-Z a-z 0-9 _ . : -', p_name
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- A batch as callers see it: name, sealed, members (counted now while it is open),
-- completed, failed (dead-lettered included), cancelled, pending, completion_job,
-- on_complete (the kind, or null), queue, created_at, sealed_at, finished_at.
CREATE OR REPLACE FUNCTION {schema}.batch_json(p_batch {schema}.batches)
RETURNS jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    WITH n AS (
        SELECT CASE WHEN p_batch.sealed_at IS NOT NULL THEN p_batch.members
                    ELSE (SELECT count(*) FROM {schema}.batch_members m
                          WHERE m.batch_id = p_batch.batch_id) END AS members)
    SELECT jsonb_build_object(
        'name', p_batch.name,
        'sealed', p_batch.sealed_at IS NOT NULL,
        'members', n.members,
        'completed', p_batch.completed,
        'failed', p_batch.failed,
        'cancelled', p_batch.cancelled,
        'pending', n.members - p_batch.completed - p_batch.failed - p_batch.cancelled,
        'finished', p_batch.finished_at IS NOT NULL,
        'completion_job', p_batch.completion_job,
        'on_complete', p_batch.on_complete_kind,
        'queue', p_batch.queue,
        'created_at', {schema}.iso_utc(p_batch.created_at),
        'sealed_at', {schema}.iso_utc(p_batch.sealed_at),
        'finished_at', {schema}.iso_utc(p_batch.finished_at))
    FROM n
$$;

-- Opens a batch. p_on_complete: the kind of the completion job (NULL: none), enqueued on
-- p_queue with p_args plus {"batch", "members", "completed", "failed", "cancelled"}.
-- Refusals: 22023 for a bad argument, 23505 for a name in use (a finished batch keeps its
-- name until the maintenance leader purges it).
CREATE OR REPLACE FUNCTION {schema}.open_batch(
    p_name text,
    p_on_complete text DEFAULT NULL,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}'::jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_batch {schema}.batches%ROWTYPE;
    v_big   bigint := 9223372036854775807;
BEGIN
    PERFORM {schema}.check_batch_name(p_name);
    IF p_args IS NULL OR jsonb_typeof(p_args) <> 'object' THEN
        RAISE EXCEPTION 'the completion job''s args must be a JSON object' USING ERRCODE = '22023';
    END IF;
    -- The completion job must be valid with the largest counts it can carry, so that it
    -- can never be refused when the batch finishes (that would fail the member's end).
    PERFORM {schema}.validate_job(
        coalesce(p_on_complete, 'batch'),
        p_args || jsonb_build_object('batch', p_name, 'members', v_big, 'completed', v_big,
                                     'failed', v_big, 'cancelled', v_big),
        p_queue, 2, 25, NULL);
    BEGIN
        INSERT INTO {schema}.batches (name, on_complete_kind, queue, on_complete_args)
        VALUES (p_name, p_on_complete, p_queue, p_args)
        RETURNING * INTO v_batch;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'batch "%" already exists', p_name USING ERRCODE = '23505';
    END;
    RETURN {schema}.batch_json(v_batch);
END
$$;

-- Makes jobs written earlier in the caller's transaction members of the open batch
-- p_name (the producers' path: InsertOpts::batch, insert_job_compat's p_batch,
-- insert_jobs_compat's "batch"). Refusals: 23503 when no such batch exists, 55000 when it
-- is sealed. SECURITY DEFINER (sql/security/function_settings.sql): a producer needs no
-- grant on the batch tables.
CREATE OR REPLACE FUNCTION {schema}.add_batch_members(p_name text, p_ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_batch  record;
    v_ended  bigint[];
    v_states text[];
    v_bad    bigint;
BEGIN
    PERFORM {schema}.check_batch_name(p_name);
    -- KEY SHARE: blocks a sealer (FOR UPDATE) until this transaction ends, and nobody else
    SELECT b.batch_id, b.sealed_at INTO v_batch
    FROM {schema}.batches b WHERE b.name = p_name
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'batch "%" does not exist', p_name
            USING ERRCODE = '23503', HINT = 'Open it first (awa batch open, WorkflowAdmin::open_batch).';
    END IF;
    IF v_batch.sealed_at IS NOT NULL THEN
        RAISE EXCEPTION 'batch "%" is sealed: no job can join it any more', p_name
            USING ERRCODE = '55000';
    END IF;
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN;
    END IF;
    -- Only jobs not yet claimed or ended (staged by this transaction, scheduled, waiting,
    -- or ended at their enqueue below), none already a member: a member that never ends
    -- would keep the batch from finishing.
    SELECT i INTO v_bad
    FROM unnest(p_ids) i
    WHERE i IS NULL
       OR EXISTS (SELECT 1 FROM {schema}.batch_members m WHERE m.job_id = i)
       OR NOT (EXISTS (SELECT 1 FROM {schema}.enqueue_staging s WHERE s.job_id = i)
               OR EXISTS (SELECT 1 FROM {schema}.deferred_jobs d WHERE d.job_id = i)
               OR EXISTS (SELECT 1 FROM {schema}.waiting_jobs w WHERE w.job_id = i)
               OR EXISTS (SELECT 1 FROM {schema}.job_dependencies c
                          JOIN {schema}.done_entries d ON d.job_id = c.child_id
                                                      AND d.lane_seq = -c.child_id
                          WHERE c.child_id = i))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % cannot join batch "%": only a job enqueued in this transaction, not a member yet, can',
            coalesce(v_bad::text, 'NULL'), p_name USING ERRCODE = '22023';
    END IF;
    INSERT INTO {schema}.batch_members (job_id, batch_id)
    SELECT DISTINCT i, v_batch.batch_id FROM unnest(p_ids) i;
    -- A job with parents may have ended at its enqueue (a parent had already failed, under
    -- the cancel or fail policy): its body sits at lane_seq = -job_id. Counted now.
    IF EXISTS (SELECT 1 FROM {schema}.job_dependencies d WHERE d.child_id = ANY (p_ids)) THEN
        SELECT array_agg(d.job_id ORDER BY d.job_id), array_agg(d.state ORDER BY d.job_id)
        INTO v_ended, v_states
        FROM {schema}.done_entries d
        WHERE d.job_id = ANY (p_ids) AND d.lane_seq = -d.job_id
          AND d.job_id IN (SELECT c.child_id FROM {schema}.job_dependencies c
                           WHERE c.child_id = ANY (p_ids));
        PERFORM {schema}.apply_batch_ends(v_ended, v_states);
    END IF;
END
$$;

-- Enqueues the completion job of a batch whose members have all ended and marks it
-- finished; nothing if it already is. The caller holds the batch row locked.
CREATE OR REPLACE FUNCTION {schema}.finish_batch(p_batch_id bigint)
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_batch {schema}.batches%ROWTYPE;
    v_job   bigint;
BEGIN
    UPDATE {schema}.batches b SET finished_at = now()
    WHERE b.batch_id = p_batch_id AND b.finished_at IS NULL
    RETURNING * INTO v_batch;
    IF NOT FOUND OR v_batch.on_complete_kind IS NULL THEN
        RETURN;
    END IF;
    SELECT j.id INTO v_job
    FROM {schema}.insert_job_compat(
        p_kind => v_batch.on_complete_kind,
        p_queue => v_batch.queue,
        p_args => v_batch.on_complete_args
                  || jsonb_build_object('batch', v_batch.name, 'members', v_batch.members,
                                        'completed', v_batch.completed, 'failed', v_batch.failed,
                                        'cancelled', v_batch.cancelled)) j;
    UPDATE {schema}.batches b SET completion_job = v_job WHERE b.batch_id = p_batch_id;
END
$$;

-- Seals a batch: no job joins it after this. Waits for the transactions adding members to
-- it to end, counts its members, and finishes it at once if they have all ended (a batch
-- sealed empty finishes at once). Sealing a sealed batch changes nothing. Returns
-- batch_json; 23503 for a batch that does not exist.
CREATE OR REPLACE FUNCTION {schema}.seal_batch(p_name text)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_batch {schema}.batches%ROWTYPE;
BEGIN
    PERFORM {schema}.check_batch_name(p_name);
    PERFORM 1 FROM {schema}.batches b WHERE b.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'batch "%" does not exist', p_name USING ERRCODE = '23503';
    END IF;
    -- A new statement: its snapshot shows the members of every producer that held the row.
    UPDATE {schema}.batches b
    SET sealed_at = now(),
        members = (SELECT count(*) FROM {schema}.batch_members m WHERE m.batch_id = b.batch_id)
    WHERE b.name = p_name AND b.sealed_at IS NULL
    RETURNING * INTO v_batch;
    IF FOUND AND v_batch.completed + v_batch.failed + v_batch.cancelled = v_batch.members THEN
        PERFORM {schema}.finish_batch(v_batch.batch_id);
    END IF;
    SELECT * INTO v_batch FROM {schema}.batches b WHERE b.name = p_name;
    RETURN {schema}.batch_json(v_batch);
END
$$;

-- Applies job ends (p_states[i] is p_ids[i]'s end; other states are ignored) to the batches
-- the jobs are pending members of, and finishes the batches that leaves complete. Called
-- by resolve_parent_ends for every job end it is given.
CREATE OR REPLACE FUNCTION {schema}.apply_batch_ends(p_ids bigint[], p_states text[])
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_done bigint;
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0
       OR NOT EXISTS (SELECT 1 FROM {schema}.batch_members m
                      WHERE m.job_id = ANY (p_ids) AND m.state IS NULL) THEN
        RETURN;
    END IF;
    -- The batch rows first, in id order: two closers with common batches never deadlock.
    PERFORM 1
    FROM {schema}.batches b
    WHERE b.batch_id IN (SELECT m.batch_id FROM {schema}.batch_members m
                         WHERE m.job_id = ANY (p_ids) AND m.state IS NULL)
    ORDER BY b.batch_id
    FOR NO KEY UPDATE;

    FOR v_done IN
        WITH ended AS (
            SELECT DISTINCT ON (e.id) e.id, e.state
            FROM unnest(p_ids, p_states) AS e(id, state)
            WHERE e.state IN ('completed', 'failed', 'cancelled', 'dlq')
            ORDER BY e.id),
        marked AS (
            UPDATE {schema}.batch_members m
            SET state = x.state, ended_at = now()
            FROM ended x
            WHERE m.job_id = x.id AND m.state IS NULL
            RETURNING m.batch_id, m.state),
        per_batch AS (
            SELECT k.batch_id,
                   count(*) FILTER (WHERE k.state = 'completed') AS completed,
                   count(*) FILTER (WHERE k.state IN ('failed', 'dlq')) AS failed,
                   count(*) FILTER (WHERE k.state = 'cancelled') AS cancelled
            FROM marked k
            GROUP BY k.batch_id),
        counted AS (
            UPDATE {schema}.batches b
            SET completed = b.completed + p.completed,
                failed = b.failed + p.failed,
                cancelled = b.cancelled + p.cancelled
            FROM per_batch p
            WHERE b.batch_id = p.batch_id
            RETURNING b.batch_id, b.sealed_at, b.finished_at, b.members,
                      b.completed + b.failed + b.cancelled AS ended)
        SELECT c.batch_id FROM counted c
        WHERE c.sealed_at IS NOT NULL AND c.finished_at IS NULL AND c.ended = c.members
        ORDER BY c.batch_id
    LOOP
        PERFORM {schema}.finish_batch(v_done);
    END LOOP;
END
$$;

-- One batch (batch_json), or NULL.
CREATE OR REPLACE FUNCTION {schema}.batch_view(p_name text)
RETURNS jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT {schema}.batch_json(b) FROM {schema}.batches b WHERE b.name = p_name
$$;

-- The newest batches first, at most p_limit; p_open_only: those not finished.
CREATE OR REPLACE FUNCTION {schema}.batch_list(p_limit integer, p_open_only boolean DEFAULT false)
RETURNS SETOF jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT {schema}.batch_json(b)
    FROM {schema}.batches b
    WHERE NOT p_open_only OR b.finished_at IS NULL
    ORDER BY b.batch_id DESC
    LIMIT greatest(p_limit, 0)
$$;

-- The members of a batch, lowest id first after p_after_id, at most p_limit:
-- [{"id", "state"}], the state being the member's end or, before it, its state now.
CREATE OR REPLACE FUNCTION {schema}.batch_members_json(
    p_name text, p_limit integer, p_after_id bigint DEFAULT 0)
RETURNS jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', m.job_id,
               'state', coalesce(m.state, (SELECT s.state FROM {schema}.job_live_state(m.job_id) s)))
           ORDER BY m.job_id), '[]'::jsonb)
    FROM (SELECT m.* FROM {schema}.batch_members m
          JOIN {schema}.batches b ON b.batch_id = m.batch_id
          WHERE b.name = p_name AND m.job_id > p_after_id
          ORDER BY m.job_id
          LIMIT greatest(p_limit, 0)) m
$$;

-- The leader's retention: batches finished before p_keep ago, with their member rows.
CREATE OR REPLACE FUNCTION {schema}.purge_batches(p_keep interval, p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n integer;
BEGIN
    DELETE FROM {schema}.batches b
    WHERE b.batch_id IN (SELECT x.batch_id FROM {schema}.batches x
                         WHERE x.finished_at < now() - p_keep
                         ORDER BY x.finished_at LIMIT p_limit);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

-- Sets (p_kind not NULL) or removes (p_kind NULL) the job a queue enqueues when one of its
-- jobs ends: p_trigger 'completed', or 'exhausted' (ended failed or dead-lettered: its last
-- attempt failed, or the handler failed it for good). The job, kind p_kind on
-- p_target_queue (default: p_queue), gets args {"job_id", "kind", "queue", "state"} and,
-- when exhausted, "error" (the last error, at most 2000 characters). Returns the queue's
-- follow-ups (queue_follow_ups_json).
CREATE OR REPLACE FUNCTION {schema}.set_queue_follow_up(
    p_queue text, p_trigger text, p_kind text, p_target_queue text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    PERFORM {schema}.check_queue_name(p_queue);
    IF p_trigger IS NULL OR p_trigger NOT IN ('completed', 'exhausted') THEN
        RAISE EXCEPTION 'unknown follow-up trigger "%" (expected completed or exhausted)', p_trigger
            USING ERRCODE = '22023';
    END IF;
    IF p_kind IS NULL THEN
        DELETE FROM {schema}.queue_follow_ups f WHERE f.queue = p_queue AND f.trigger = p_trigger;
    ELSE
        PERFORM {schema}.validate_job(p_kind, '{}'::jsonb, coalesce(p_target_queue, p_queue), 2, 25, NULL);
        INSERT INTO {schema}.queue_follow_ups (queue, trigger, kind, target_queue)
        VALUES (p_queue, p_trigger, p_kind, coalesce(p_target_queue, p_queue))
        ON CONFLICT (queue, trigger) DO UPDATE
        SET kind = excluded.kind, target_queue = excluded.target_queue, created_at = now();
    END IF;
    RETURN {schema}.queue_follow_ups_json(p_queue);
END
$$;

-- A queue's follow-ups: [{"trigger", "kind", "queue"}] (every queue's when p_queue is NULL,
-- with "source_queue" too).
CREATE OR REPLACE FUNCTION {schema}.queue_follow_ups_json(p_queue text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE
SET jit = off AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('source_queue', f.queue, 'trigger', f.trigger,
                                                 'kind', f.kind, 'queue', f.target_queue)
                              ORDER BY f.queue, f.trigger), '[]'::jsonb)
    FROM {schema}.queue_follow_ups f
    WHERE p_queue IS NULL OR f.queue = p_queue
$$;

-- Enqueues the follow-up jobs of attempts close_attempts has just ended, in its
-- transaction: p_ids[i] ended as p_states[i] in queue p_queues[i] (kind p_kinds[i], last
-- error p_errors[i]). p_specs[i]: the handler's follow-ups, a JSON array of jobs in
-- insert_jobs_compat's form, each with "on": "completed" or "exhausted"; those whose
-- trigger matches the end are enqueued (without parents or a batch: those keys are
-- dropped), then the queue's own (queue_follow_ups). A queue's follow-up job carries
-- metadata {"awa.follow_up_of": id}, and such a job (p_chained[i]) triggers no queue
-- follow-up itself, so a queue's follow-up that lands on a queue with one never loops.
-- Returns how many jobs were enqueued.
DROP FUNCTION IF EXISTS {schema}.enqueue_follow_ups(
    bigint[], text[], text[], text[], text[], jsonb[]);
CREATE OR REPLACE FUNCTION {schema}.enqueue_follow_ups(
    p_ids bigint[], p_states text[], p_queues text[], p_kinds text[], p_errors text[],
    p_specs jsonb[], p_chained boolean[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_jobs jsonb;
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN 0;
    END IF;
    WITH ended AS (
        SELECT e.*,
               CASE WHEN e.state = 'completed' THEN 'completed'
                    WHEN e.state IN ('failed', 'dlq') THEN 'exhausted' END AS trigger
        FROM unnest(p_ids, p_states, p_queues, p_kinds, p_errors,
                    coalesce(p_specs, array_fill(NULL::jsonb, ARRAY[cardinality(p_ids)])),
                    coalesce(p_chained, array_fill(false, ARRAY[cardinality(p_ids)])))
             WITH ORDINALITY AS e(id, state, queue, kind, error, specs, chained, ord)),
    jobs AS (
        SELECT e.ord, s.n,
               s.spec - ARRAY['on', 'after', 'after_index', 'on_parent_failure', 'batch'] AS job
        FROM ended e
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(e.specs) = 'array' THEN e.specs ELSE '[]'::jsonb END)
            WITH ORDINALITY AS s(spec, n)
        WHERE e.trigger IS NOT NULL AND s.spec->>'on' = e.trigger
        UNION ALL
        SELECT e.ord, 1000000000, jsonb_build_object(
                   'kind', f.kind, 'queue', f.target_queue,
                   'args', jsonb_strip_nulls(jsonb_build_object(
                       'job_id', e.id, 'kind', e.kind, 'queue', e.queue, 'state', e.state,
                       'error', CASE WHEN e.trigger = 'exhausted' THEN left(e.error, 2000) END)),
                   'metadata', jsonb_build_object('awa.follow_up_of', e.id))
        FROM ended e
        JOIN {schema}.queue_follow_ups f ON f.queue = e.queue AND f.trigger = e.trigger
        WHERE NOT e.chained)
    SELECT jsonb_agg(j.job ORDER BY j.ord, j.n) INTO v_jobs FROM jobs j;
    IF v_jobs IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM {schema}.insert_jobs_compat(v_jobs);
    RETURN jsonb_array_length(v_jobs);
END
$$;
