-- Unique jobs (docs/scheduling.md "Unique jobs"; include/awa/job.hpp UniqueOpts).
--
-- The C++ producer and insert_job_compat both go through insert_job_compat's p_unique, so
-- the key is computed here, once, and the two agree by construction.

-- The unique options, as insert_job_compat's p_unique takes them:
--   {"by_args": bool, "by_queue": bool, "period": seconds, "states": [state, ...]}
-- every field optional (defaults: true, true, no period, the states of a job that has not
-- ended). Returns them checked and completed; anything else is refused with 22023.
CREATE OR REPLACE FUNCTION {schema}.unique_spec(p_unique jsonb)
RETURNS TABLE (by_args boolean, by_queue boolean, period bigint, states text[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_key    text;
    v_period numeric;
    v_states text[];
BEGIN
    IF jsonb_typeof(p_unique) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'unique options must be a JSON object {"by_args", "by_queue", "period", "states"}'
            USING ERRCODE = '22023';
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_unique) LOOP
        IF v_key NOT IN ('by_args', 'by_queue', 'period', 'states') THEN
            RAISE EXCEPTION 'unknown unique option "%" (expected by_args, by_queue, period, states)', v_key
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF jsonb_typeof(p_unique -> 'by_args') NOT IN ('boolean', 'null')
       OR jsonb_typeof(p_unique -> 'by_queue') NOT IN ('boolean', 'null') THEN
        RAISE EXCEPTION 'unique options by_args and by_queue must be true or false' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_unique -> 'period') NOT IN ('number', 'null') THEN
        RAISE EXCEPTION 'unique option period must be a number of seconds' USING ERRCODE = '22023';
    END IF;
    v_period := (p_unique ->> 'period')::numeric;
    IF v_period IS NOT NULL AND (v_period <> trunc(v_period) OR v_period < 1 OR v_period > 3155760000) THEN
        RAISE EXCEPTION 'unique period % is not a whole number of seconds from 1 to 3155760000 (100 years)', v_period
            USING ERRCODE = '22023';
    END IF;
    IF p_unique ? 'states' AND jsonb_typeof(p_unique -> 'states') <> 'null' THEN
        IF jsonb_typeof(p_unique -> 'states') <> 'array'
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_unique -> 'states') e
                      WHERE jsonb_typeof(e.value) <> 'string') THEN
            RAISE EXCEPTION 'unique option states must be an array of job states' USING ERRCODE = '22023';
        END IF;
        SELECT array_agg(DISTINCT e.value ORDER BY e.value) INTO v_states
        FROM jsonb_array_elements_text(p_unique -> 'states') e;
        IF v_states IS NULL THEN
            RAISE EXCEPTION 'unique option states is empty: name at least one job state' USING ERRCODE = '22023';
        END IF;
        PERFORM {schema}.check_job_state(s) FROM unnest(v_states) s;
    ELSE
        v_states := ARRAY['available', 'retryable', 'running', 'scheduled', 'waiting',
                          'waiting_external'];
    END IF;
    RETURN QUERY SELECT coalesce((p_unique ->> 'by_args')::boolean, true),
                        coalesce((p_unique ->> 'by_queue')::boolean, true),
                        v_period::bigint, v_states;
END
$$;

-- The unique key: sha256 of one canonical jsonb text holding the kind, plus the args when
-- p_by_args, plus the queue when p_by_queue, plus the period and its bucket
-- floor(epoch(p_at) / p_period) when a period is set. jsonb's text form is canonical
-- (object keys sorted, no insignificant whitespace), so args that are equal JSON objects
-- give equal keys however they were written; a part left out is an absent field, never a
-- null, so {"args": null} and "not by args" differ. The period itself is part of the key,
-- so bucket n of a 60 s period is not bucket n of a 120 s one. The enqueue shard is not:
-- uniqueness holds across shards and across changes of enqueue_shards.
CREATE OR REPLACE FUNCTION {schema}.unique_key(
    p_kind text, p_queue text, p_args jsonb, p_at timestamptz, p_by_args boolean,
    p_by_queue boolean, p_period bigint)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(convert_to((
        jsonb_build_object('kind', p_kind)
        || CASE WHEN p_by_args THEN jsonb_build_object('args', p_args) ELSE '{}'::jsonb END
        || CASE WHEN p_by_queue THEN jsonb_build_object('queue', p_queue) ELSE '{}'::jsonb END
        || CASE WHEN p_period IS NOT NULL
                THEN jsonb_build_object('period', p_period,
                                        'bucket', floor(extract(epoch FROM p_at) / p_period)::bigint)
                ELSE '{}'::jsonb END)::text, 'UTF8'))
$$;

-- Claims p_key for job p_job_id, or reports the job that holds it.
--
-- Race-free through the primary key: a second inserter of a key that an uncommitted
-- transaction has just inserted waits (ON CONFLICT) for that transaction, then either
-- inserts (it rolled back) or finds the row (it committed). An existing row is locked
-- (FOR UPDATE), so inserters of one key serialise on it, and its holder's state is read
-- in a statement that starts after the lock is granted — it sees the holder's commit.
-- The holder still in one of the row's states: (holder, true, its state). Otherwise —
-- the holder ended, was dead-lettered, or has no retained rows (pruned; such a job counts
-- as gone) — the key is taken over: (p_job_id, false, NULL). This lazy release is why the
-- completion path never touches unique_keys. A rollback of the claiming transaction
-- undoes the claim (INSERT or takeover), so the key is free again.
--
-- SECURITY DEFINER (sql/security/function_settings.sql): the producer role may claim keys
-- and learn a holder's id and state, without any privilege on unique_keys or on the
-- tables job_states reads.
CREATE OR REPLACE FUNCTION {schema}.claim_unique_key(p_key bytea, p_job_id bigint, p_states text[])
RETURNS TABLE (job_id bigint, duplicate boolean, state text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    v_holder bigint;
    v_states text[];
    v_state  text;
BEGIN
    -- Bounded: a row can only vanish between the INSERT and the SELECT if someone deletes
    -- it in between (the maintenance leader's purge_unique_keys, below, once its holder
    -- has left the key's states; or an operator); each retry then inserts or finds a row.
    FOR i IN 1..10 LOOP
        INSERT INTO {schema}.unique_keys AS u (key, job_id, states)
        VALUES (p_key, p_job_id, p_states)
        ON CONFLICT ON CONSTRAINT unique_keys_pkey DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT p_job_id, false, NULL::text;
            RETURN;
        END IF;
        SELECT u.job_id, u.states INTO v_holder, v_states
        FROM {schema}.unique_keys u WHERE u.key = p_key
        FOR UPDATE;
        IF FOUND THEN
            -- A holder this transaction enqueued is still staged (placed at commit,
            -- 0032_enqueue_staging.sql), where job_states cannot see it: it is available.
            -- Another transaction's staged holder cannot be met here: the row lock above
            -- waited for that transaction to end, and its commit placed the job.
            IF EXISTS (SELECT 1 FROM {schema}.enqueue_staging g
                       WHERE g.xact = pg_current_xact_id() AND g.job_id = v_holder) THEN
                v_state := 'available';
            ELSE
                SELECT s.state INTO v_state FROM {schema}.job_states(v_holder) s;
            END IF;
            IF v_state = ANY (v_states) THEN
                RETURN QUERY SELECT v_holder, true, v_state;
                RETURN;
            END IF;
            UPDATE {schema}.unique_keys u
            SET job_id = p_job_id, states = p_states, created_at = now()
            WHERE u.key = p_key;
            RETURN QUERY SELECT p_job_id, false, NULL::text;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'claim_unique_key: the key kept vanishing; retry the transaction'
        USING ERRCODE = '40001';
END
$$;

-- The keys of the unique jobs of one enqueue call with more than one job (QueueStorage::
-- insert_many and friends; docs/scheduling.md "Costs and limits"), claimed before any job
-- of the call is written and in key order, so that two such calls never wait for each
-- other's keys in opposite orders, and the call's jobs can then all be written through the
-- lane-ordered bulk path. Input: one element per unique job, in the call's order (ord is
-- the 1-based position here). Output, one row per input: its key; duplicate = true with
-- holder = the job that holds the key, or duplicate = true with a NULL holder when an
-- equal job earlier in the same call (in key order: same key, smaller ord) claimed it;
-- duplicate = false when this call claimed the key — for job id 0, a placeholder the
-- caller replaces with the job's id (set_unique_key_holders) once it has written it, in
-- the same transaction. The key is computed as insert_job_compat computes it.
CREATE OR REPLACE FUNCTION {schema}.claim_unique_keys(
    p_kinds text[], p_queues text[], p_args jsonb[], p_run_at timestamptz[], p_unique jsonb[])
RETURNS TABLE (ord integer, key bytea, holder bigint, duplicate boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    r      record;
    c      record;
    v_prev bytea;
BEGIN
    FOR r IN
        SELECT t.ord::integer AS ord, k.key, s.states
        FROM unnest(p_kinds, p_queues, p_args, p_run_at, p_unique)
                 WITH ORDINALITY AS t(kind, queue, args, run_at, spec, ord)
        CROSS JOIN LATERAL {schema}.unique_spec(t.spec) AS s
        CROSS JOIN LATERAL (
            SELECT {schema}.unique_key(t.kind, t.queue, t.args, coalesce(t.run_at, now()),
                                       s.by_args, s.by_queue, s.period) AS key) AS k
        ORDER BY k.key, t.ord
    LOOP
        IF r.key = v_prev THEN
            RETURN QUERY SELECT r.ord, r.key, NULL::bigint, true;
            CONTINUE;
        END IF;
        v_prev := r.key;
        SELECT * INTO c FROM {schema}.claim_unique_key(r.key, 0, r.states);
        RETURN QUERY SELECT r.ord, r.key, CASE WHEN c.duplicate THEN c.job_id END, c.duplicate;
    END LOOP;
END
$$;

-- Names the jobs that hold the keys claim_unique_keys claimed for the placeholder 0 in
-- this transaction. Only placeholder rows change, so a producer cannot hand another
-- job's key to a job of its choice. Returns how many rows it named. SECURITY DEFINER
-- like claim_unique_key (sql/security/function_settings.sql).
CREATE OR REPLACE FUNCTION {schema}.set_unique_key_holders(p_keys bytea[], p_job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    UPDATE {schema}.unique_keys u
    SET job_id = x.job_id
    FROM unnest(p_keys, p_job_ids) AS x(key, job_id)
    WHERE u.key = x.key AND u.job_id = 0;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

-- Forgets keys whose holder is no longer in the key's states: a job that ended (with the
-- default states), or whose rows were all pruned (job_states finds nothing). Keeping such
-- a key frees nothing — the next claim of it would take it over — so without this
-- unique_keys would grow by one row per distinct key forever. The maintenance leader calls
-- it every purge round. It scans at most p_limit keys in key order after p_after (NULL:
-- from the start) and returns how many it deleted and the last key it scanned (NULL when
-- the scan reached the end: start again from the beginning next time).
--
-- Keys locked by a claim in progress are skipped (SKIP LOCKED); a claim that meets a key
-- deleted under it inserts it again (claim_unique_key's loop). Under the row lock the
-- holder's state is read in this statement's snapshot, where the key row and its job,
-- written by one transaction, are both visible or both not: a key whose job is still in
-- its states is never deleted.
CREATE OR REPLACE FUNCTION {schema}.purge_unique_keys(p_after bytea, p_limit integer)
RETURNS TABLE (purged integer, last_key bytea)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'purge_unique_keys: limit % is outside 1..100000', p_limit
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH scanned AS MATERIALIZED (
        SELECT u.key, u.job_id, u.states
        FROM {schema}.unique_keys u
        WHERE u.key > coalesce(p_after, ''::bytea)  -- keys are sha256 digests, never empty
        ORDER BY u.key
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED),
    freed AS (
        DELETE FROM {schema}.unique_keys u
        USING scanned c
        WHERE u.key = c.key
          AND NOT coalesce((SELECT s.state FROM {schema}.job_states(c.job_id) s) = ANY (c.states),
                           false)
        RETURNING 1)
    SELECT (SELECT count(*) FROM freed)::integer,
           CASE WHEN (SELECT count(*) FROM scanned) >= p_limit
                THEN (SELECT c.key FROM scanned c ORDER BY c.key DESC LIMIT 1) END;
END
$$;
