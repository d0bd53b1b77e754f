-- SQL enqueue for any language (docs/api.md): routes exactly like the C++ producer.
--
-- The signature is AWA's awa.insert_job_compat — same parameter names and order, so a
-- producer written for AWA, positional or named, works unchanged:
--   p_kind, p_queue DEFAULT 'default', p_args DEFAULT '{}', p_state DEFAULT 'available',
--   p_priority DEFAULT 2, p_max_attempts DEFAULT 25, p_run_at, p_metadata, p_tags,
--   p_unique_key, p_unique_states, p_ordering_key
-- followed by awa-cpp's p_unique, p_after, p_on_parent_failure and p_batch (below), with these
-- differences:
--   - p_state is text (AWA: its job_state enum): 'available' (a future p_run_at makes it
--     'scheduled', as before) or 'scheduled' (deferred until p_run_at, or due now; the
--     maintenance leader promotes it). AWA's other states ('running', 'completed', ...)
--     are refused with SQLSTATE 0A000 (feature_not_supported), any other value with 22023.
--   - p_unique_key / p_unique_states (AWA's caller-computed key and state bitmask):
--     refused with 0A000 unless NULL. Unique jobs take p_unique instead:
--     {"by_args": bool, "by_queue": bool, "period": seconds, "states": [state, ...]},
--     every field optional (unique_spec(), sql/functions/0025_unique.sql); the key is
--     computed here from the kind, args, queue and period bucket of p_run_at (now when
--     NULL), exactly as for the C++ producer, which calls this function for unique jobs.
--     While an equal job is in one of the states, nothing is inserted and the row
--     returned describes the existing job: its id, duplicate = true, its state, and the
--     given kind, queue and args (the other columns NULL).
--   - p_after (job ids) enqueues the job after those jobs, with p_on_parent_failure
--     ('cancel' by default, 'run', 'fail'): enqueue_after (0067_dependencies.sql) does the
--     work and its refusals (23503 for a parent that does not exist); the row returned has
--     that function's state ('waiting' until the parents have ended). Not with p_unique.
--   - p_batch (a batch name) makes the job a member of that open batch (add_batch_members,
--     0069_batches.sql: 23503 when it does not exist, 55000 when it is sealed). Not with
--     p_unique.
--   - p_priority / p_max_attempts are integer (AWA: smallint; a smallint argument
--     converts implicitly, and so does a plain integer literal).
--   - an explicit NULL for kind, queue, args, state, priority or max_attempts is refused
--     (22023) instead of replaced by the default; NULL metadata, tags, run_at or
--     ordering_key mean none (AWA's defaults for metadata and tags are '{}' and an empty
--     array).
--   - it returns one row describing the job (id, kind, queue, args, state, priority,
--     attempt, max_attempts, run_at, created_at, metadata, tags, ordering_key,
--     enqueue_shard and lane_seq, and duplicate), not AWA's jobs row type:
--     SELECT id FROM insert_job_compat(...). enqueue_shard and lane_seq are NULL: they
--     are assigned when the transaction commits (see below).
-- Every refusal happens before anything is written, and the statement's error rolls
-- back the rest.
--
-- Several calls in one transaction (docs/api.md, tested in enqueue_tx_pgtest.cpp): an
-- available job is staged (enqueue_staging) and placed in its lane when the transaction
-- commits, all of the transaction's lanes at once in the global lock order
-- (place_staged_jobs, 0032_enqueue_staging.sql). So any sequence of calls — several
-- queues, priorities, ordering keys, mixed with the C++ producer's calls — cannot
-- deadlock with other producers on lane locks, and all unkeyed rows of one
-- (queue, priority) in a transaction share one lane. A unique call holds its key's row
-- lock to commit: two transactions that claim the same keys in opposite orders can still
-- deadlock on those rows (40P01), as with any two row locks; claim keys in a fixed order.

-- "-- optional(feature) {" ... "-- optional }": see 0040_claim_ready_runtime.sql.

-- Earlier signatures: the one before AWA's order ((p_kind, p_args, p_queue, ...)
-- returning bigint), the one before p_unique, the one before p_after and the one before
-- p_batch. Dropped, since their defaults would make
-- calls ambiguous with this one (and a changed OUT list needs a DROP anyway). This file is
-- re-applied on every change, so each DROP must name the old argument types exactly.
DROP FUNCTION IF EXISTS {schema}.insert_job_compat(
    text, jsonb, text, integer, integer, timestamptz, bytea, jsonb, text[]);
DROP FUNCTION IF EXISTS {schema}.insert_job_compat(
    text, text, jsonb, text, integer, integer, timestamptz, jsonb, text[], bytea, bit(8), bytea);
DROP FUNCTION IF EXISTS {schema}.insert_job_compat(
    text, text, jsonb, text, integer, integer, timestamptz, jsonb, text[], bytea, bit(8), bytea, jsonb);
DROP FUNCTION IF EXISTS {schema}.insert_job_compat(
    text, text, jsonb, text, integer, integer, timestamptz, jsonb, text[], bytea, bit(8), bytea, jsonb,
    bigint[], text);

CREATE OR REPLACE FUNCTION {schema}.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}'::jsonb,
    p_state text DEFAULT 'available',
    p_priority integer DEFAULT 2,
    p_max_attempts integer DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT NULL,
    p_tags text[] DEFAULT NULL,
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL,
    p_unique jsonb DEFAULT NULL,
    p_after bigint[] DEFAULT NULL,
    p_on_parent_failure text DEFAULT NULL,
    p_batch text DEFAULT NULL,
    OUT id bigint,
    OUT kind text,
    OUT queue text,
    OUT args jsonb,
    OUT state text,
    OUT priority smallint,
    OUT attempt smallint,
    OUT max_attempts smallint,
    OUT run_at timestamptz,
    OUT created_at timestamptz,
    OUT metadata jsonb,
    OUT tags text[],
    OUT ordering_key bytea,
    OUT enqueue_shard smallint,
    OUT lane_seq bigint,
    OUT duplicate boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id     bigint;
    v_run_at timestamptz;
    v_now    timestamptz := now();
    v_spec   record;
    v_claim  record;
BEGIN
    IF p_unique_key IS NOT NULL OR p_unique_states IS NOT NULL THEN
        RAISE EXCEPTION 'insert_job_compat: % is not supported (AWA''s caller-computed unique key); pass NULL and use p_unique',
            CASE WHEN p_unique_key IS NOT NULL THEN 'p_unique_key' ELSE 'p_unique_states' END
            USING ERRCODE = '0A000';
    END IF;
    IF p_state IN ('retryable', 'running', 'completed', 'failed', 'cancelled', 'waiting_external') THEN
        RAISE EXCEPTION 'insert_job_compat: p_state ''%'' is not supported (only ''available'' and ''scheduled'')',
            p_state USING ERRCODE = '0A000';
    ELSIF p_state IS NULL OR p_state NOT IN ('available', 'scheduled') THEN
        RAISE EXCEPTION 'insert_job_compat: invalid p_state %: use ''available'' or ''scheduled''',
            coalesce(quote_literal(p_state), 'NULL') USING ERRCODE = '22023';
    END IF;
    PERFORM {schema}.validate_job(p_kind, p_args, p_queue, p_priority, p_max_attempts, p_ordering_key);
    PERFORM {schema}.validate_job_extras(p_metadata, p_tags, p_run_at);
    IF p_after IS NOT NULL AND p_unique IS NOT NULL THEN
        RAISE EXCEPTION 'insert_job_compat: a job enqueued after parents (p_after) cannot also be unique'
            USING ERRCODE = '22023';
    ELSIF p_after IS NULL AND p_on_parent_failure IS NOT NULL THEN
        RAISE EXCEPTION 'insert_job_compat: p_on_parent_failure applies only with p_after'
            USING ERRCODE = '22023';
    ELSIF p_batch IS NOT NULL AND p_unique IS NOT NULL THEN
        RAISE EXCEPTION 'insert_job_compat: a batch member (p_batch) cannot also be unique'
            USING ERRCODE = '22023';
    END IF;
    -- optional(unique) {
    IF p_unique IS NOT NULL THEN
        SELECT * INTO v_spec FROM {schema}.unique_spec(p_unique);
    END IF;
    -- optional }
    v_id := nextval('{schema}.job_ids');
    duplicate := false;

    -- optional(unique) {
    IF p_unique IS NOT NULL THEN
        -- Before any lane lock: the key's row lock is the one concurrent inserters of an
        -- equal job wait on.
        SELECT c.job_id, c.duplicate, c.state INTO v_claim
        FROM {schema}.claim_unique_key(
            {schema}.unique_key(p_kind, p_queue, p_args, coalesce(p_run_at, v_now),
                                v_spec.by_args, v_spec.by_queue, v_spec.period),
            v_id, v_spec.states) c;
        IF v_claim.duplicate THEN
            id := v_claim.job_id;
            duplicate := true;
            state := v_claim.state;
            kind := p_kind;
            queue := p_queue;
            args := p_args;
            RETURN;
        END IF;
    END IF;
    -- optional }

    id := v_id;
    kind := p_kind;
    queue := p_queue;
    args := p_args;
    priority := p_priority;
    attempt := 0;
    max_attempts := p_max_attempts;
    created_at := v_now;
    metadata := p_metadata;
    tags := p_tags;
    ordering_key := p_ordering_key;

    IF p_after IS NOT NULL THEN
        SELECT e.id, e.state INTO id, state
        FROM {schema}.enqueue_after(p_after, p_on_parent_failure, p_kind, p_queue, p_args,
                                    p_priority, p_max_attempts,
                                    CASE WHEN p_state = 'scheduled' THEN coalesce(p_run_at, v_now)
                                         ELSE p_run_at END,
                                    p_metadata, p_tags, p_ordering_key) e;
        run_at := coalesce(p_run_at, v_now);
        IF p_batch IS NOT NULL THEN
            PERFORM {schema}.add_batch_members(p_batch, ARRAY[id]);
        END IF;
        RETURN;
    END IF;

    IF p_state = 'scheduled' OR (p_run_at IS NOT NULL AND p_run_at > v_now) THEN
        v_run_at := coalesce(p_run_at, v_now);
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
             ordering_key, metadata, tags, reason)
        VALUES (v_id, p_queue, p_priority, p_kind, p_args, p_max_attempts, v_run_at, v_now,
                p_ordering_key, p_metadata, p_tags, 'scheduled');
        state := 'scheduled';
        run_at := v_run_at;
        IF p_batch IS NOT NULL THEN
            PERFORM {schema}.add_batch_members(p_batch, ARRAY[v_id]);
        END IF;
        RETURN;
    END IF;

    -- Staged: the lane is reserved, and enqueue_shard and lane_seq assigned, when the
    -- transaction commits (place_staged_jobs, 0032_enqueue_staging.sql), so any number
    -- of calls in one transaction cannot deadlock with other producers on lane locks.
    -- The commit also sends the queue's NOTIFY.
    v_run_at := coalesce(p_run_at, v_now);
    INSERT INTO {schema}.enqueue_staging
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
         ordering_key, metadata, tags)
    VALUES (v_id, p_queue, p_priority, p_kind, p_args, p_max_attempts, v_run_at, v_now,
            p_ordering_key, p_metadata, p_tags);
    state := 'available';
    run_at := v_run_at;
    IF p_batch IS NOT NULL THEN
        PERFORM {schema}.add_batch_members(p_batch, ARRAY[v_id]);
    END IF;
END
$$;

-- Batch form: p_jobs is a JSON array of objects
--   {"kind": text, "args": json, "queue": text, "priority": int, "max_attempts": int,
--    "run_at": timestamptz, "ordering_key": text (its UTF-8 bytes are the key),
--    "metadata": json, "tags": [text],
--    "after": [job id], "after_index": [position], "on_parent_failure": text,
--    "batch": text}
-- (only "kind" is required). Returns the job ids in input order. The available rows are
-- staged like insert_job_compat's and placed at commit, one reservation per lane. A job
-- with "after" (ids of existing jobs) or "after_index" (0-based positions of earlier jobs
-- of the same array) is enqueued after them, as insert_job_compat's p_after does, once the
-- jobs without parents are staged, in input order.
CREATE OR REPLACE FUNCTION {schema}.insert_jobs_compat(p_jobs jsonb)
RETURNS TABLE (ord bigint, job_id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_dep record;
BEGIN
    IF p_jobs IS NULL OR jsonb_typeof(p_jobs) <> 'array' THEN
        RAISE EXCEPTION 'insert_jobs_compat expects a JSON array of jobs' USING ERRCODE = '22023';
    END IF;

    CREATE TEMP TABLE IF NOT EXISTS awa_compat_batch (
        ord bigint, job_id bigint, kind text, args jsonb, queue text, priority integer,
        max_attempts integer, run_at timestamptz, ordering_key bytea, metadata jsonb,
        tags text[], deferred boolean, after bigint[], after_index integer[],
        on_parent_failure text, dependent boolean, batch text) ON COMMIT DROP;
    TRUNCATE awa_compat_batch;

    INSERT INTO awa_compat_batch (ord, job_id, kind, args, queue, priority, max_attempts, run_at,
                                  ordering_key, metadata, tags, after, after_index,
                                  on_parent_failure, batch)
    SELECT e.ord, nextval('{schema}.job_ids'), e.j->>'kind', coalesce(e.j->'args', '{}'::jsonb),
           coalesce(e.j->>'queue', 'default'), coalesce((e.j->>'priority')::integer, 2),
           coalesce((e.j->>'max_attempts')::integer, 25), (e.j->>'run_at')::timestamptz,
           convert_to(e.j->>'ordering_key', 'UTF8'), e.j->'metadata',
           CASE WHEN e.j ? 'tags' THEN ARRAY(SELECT jsonb_array_elements_text(e.j->'tags')) END,
           CASE WHEN jsonb_typeof(e.j->'after') = 'array'
                THEN ARRAY(SELECT x::bigint FROM jsonb_array_elements_text(e.j->'after') x) END,
           CASE WHEN jsonb_typeof(e.j->'after_index') = 'array'
                THEN ARRAY(SELECT x::integer FROM jsonb_array_elements_text(e.j->'after_index') x) END,
           e.j->>'on_parent_failure', e.j->>'batch'
    FROM jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(j, ord);

    PERFORM {schema}.validate_job(b.kind, b.args, b.queue, b.priority, b.max_attempts, b.ordering_key),
            {schema}.validate_job_extras(b.metadata, b.tags, b.run_at)
    FROM awa_compat_batch b;
    IF EXISTS (SELECT 1 FROM awa_compat_batch b, unnest(b.after_index) AS i
               WHERE i IS NULL OR i < 0 OR i >= b.ord - 1) THEN
        RAISE EXCEPTION 'insert_jobs_compat: after_index must name earlier positions of the array (0-based)'
            USING ERRCODE = '22023';
    END IF;
    -- Jobs with parents are enqueued after the others (below).
    UPDATE awa_compat_batch b
    SET dependent = coalesce(cardinality(b.after), 0) + coalesce(cardinality(b.after_index), 0) > 0;

    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
         ordering_key, metadata, tags, reason)
    SELECT b.job_id, b.queue, b.priority, b.kind, b.args, b.max_attempts, b.run_at, now(),
           b.ordering_key, b.metadata, b.tags, 'scheduled'
    FROM awa_compat_batch b WHERE b.run_at > now() AND NOT b.dependent;
    UPDATE awa_compat_batch b SET deferred = coalesce(b.run_at > now(), false);

    -- Staged in input order (job ids were taken in it): placed, routed and notified at
    -- commit, like insert_job_compat's rows. One trigger event per call.
    INSERT INTO {schema}.enqueue_staging
        (job_id, queue, priority, kind, args, max_attempts, run_at, created_at,
         ordering_key, metadata, tags, fires)
    SELECT b.job_id, b.queue, b.priority, b.kind, b.args, b.max_attempts,
           coalesce(b.run_at, now()), now(), b.ordering_key, b.metadata, b.tags,
           b.job_id = min(b.job_id) OVER ()
    FROM awa_compat_batch b
    WHERE NOT b.deferred AND NOT b.dependent;

    FOR v_dep IN SELECT b.* FROM awa_compat_batch b WHERE b.dependent ORDER BY b.ord LOOP
        UPDATE awa_compat_batch b
        SET job_id = (SELECT e.id
                      FROM {schema}.enqueue_after(
                          coalesce(v_dep.after, '{}'::bigint[])
                              || ARRAY(SELECT p.job_id FROM awa_compat_batch p
                                       WHERE p.ord - 1 = ANY (v_dep.after_index) ORDER BY p.ord),
                          v_dep.on_parent_failure, v_dep.kind, v_dep.queue, v_dep.args,
                          v_dep.priority, v_dep.max_attempts, v_dep.run_at, v_dep.metadata,
                          v_dep.tags, v_dep.ordering_key) e)
        WHERE b.ord = v_dep.ord;
    END LOOP;

    -- Batch members, one call per batch in name order (each takes its batch's row lock).
    PERFORM {schema}.add_batch_members(x.batch, x.ids)
    FROM (SELECT b.batch, array_agg(b.job_id ORDER BY b.ord) AS ids
          FROM awa_compat_batch b WHERE b.batch IS NOT NULL
          GROUP BY b.batch ORDER BY b.batch) x;

    RETURN QUERY
    SELECT b.ord, b.job_id FROM awa_compat_batch b ORDER BY b.ord;
END
$$;
