-- Periodic (cron) jobs (docs/scheduling.md): firing by the maintenance leader, and the
-- schedule upsert / trigger / resume behind include/awa/periodic.hpp.

-- cron_next over a periodic_jobs row.
CREATE OR REPLACE FUNCTION {schema}.periodic_next(p {schema}.periodic_jobs, p_after timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT {schema}.cron_next(p.seconds, p.minutes, p.hours, p.doms, p.months, p.dows,
                              p.dom_restricted, p.dow_restricted, p.every_seconds, p.tz, p_after)
$$;

-- The latest occurrence <= p_until, given an occurrence p_from <= p_until: a bisection
-- on cron_next (first occurrence > x is monotonic in x), so a long outage of a frequent
-- schedule costs ~log2(seconds missed) calls, not one per missed occurrence.
-- Invariant: p_from is an occurrence <= p_until, and no occurrence lies in (v_hi, p_until].
CREATE OR REPLACE FUNCTION {schema}.periodic_latest(
    p {schema}.periodic_jobs, p_from timestamptz, p_until timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_lo   timestamptz := p_from;
    v_hi   timestamptz := p_until;
    v_mid  timestamptz;
    v_next timestamptz;
BEGIN
    -- Occurrences are whole seconds apart at least, so a 1 s bracket holds at most one
    -- more; 64 halvings cover any span a timestamptz can hold.
    FOR i IN 1..64 LOOP
        EXIT WHEN v_hi - v_lo <= interval '1 second';
        v_mid := v_lo + (v_hi - v_lo) / 2;
        v_next := {schema}.periodic_next(p, v_mid);
        IF v_next IS NOT NULL AND v_next <= p_until THEN
            v_lo := v_next;
        ELSE
            v_hi := v_mid;
        END IF;
    END LOOP;
    FOR i IN 1..16 LOOP
        v_next := {schema}.periodic_next(p, v_lo);
        EXIT WHEN v_next IS NULL OR v_next > p_until;
        v_lo := v_next;
    END LOOP;
    RETURN v_lo;
END
$$;

-- One job of a schedule, through the ordinary SQL enqueue (insert_job_compat: the
-- queue's current shard count, lanes, validation), with the schedule's metadata plus
-- p_meta (which wins on a clash). Returns the job id.
CREATE OR REPLACE FUNCTION {schema}.periodic_enqueue(
    p {schema}.periodic_jobs, p_run_at timestamptz, p_meta jsonb)
RETURNS bigint
LANGUAGE sql AS $$
    SELECT c.id
    FROM {schema}.insert_job_compat(
        p_kind => p.kind, p_queue => p.queue, p_args => p.args,
        p_priority => p.priority::integer, p_max_attempts => p.max_attempts::integer,
        p_run_at => p_run_at, p_metadata => coalesce(p.metadata, '{}'::jsonb) || p_meta,
        p_tags => p.tags) c
$$;

-- fire_due_periodic(p_limit, p_catch_up_limit): what the maintenance leader calls every
-- round. Up to p_limit due, unpaused schedules are taken FOR UPDATE SKIP LOCKED (most
-- overdue first; schedules whose last fire failed after the others, so a broken one
-- cannot starve them), and each is fired in its own subtransaction:
--   - coalesce (default): ONE job, for the latest occurrence <= now(); next_fire_at
--     becomes the first occurrence after it (> now()). The missed ones are skipped.
--   - catch_up: one job per missed occurrence, oldest first, at most p_catch_up_limit
--     per call; next_fire_at becomes the first one not fired, so the next round goes on.
-- A job's run_at is its occurrence (in the past by the leader's lag) and its metadata
-- carries {"periodic": name, "occurrence": ISO 8601 UTC}.
-- Exactly once per occurrence: the enqueue and the compare-and-swap
--   UPDATE ... SET next_fire_at = <next>, last_fired_at, last_job_id
--   WHERE name = <name> AND next_fire_at = <the value read>
-- commit together or not at all. The row lock makes a second firer (another leader
-- after a fail-over, an operator's call) skip the row while this one holds it, and see
-- the advanced next_fire_at after it commits; the CAS makes it a no-op even if it got
-- there anyway. A crash mid-fire rolls back both.
-- A failing enqueue (a bad queue name, args over a limit) rolls back that schedule's
-- subtransaction only: the schedule is not advanced, last_error records why, a row with
-- `error` set is returned, and the other schedules fire.
-- Lock order: schedules are fired in (queue, priority) order, and all jobs of one
-- (queue, priority) in a transaction share a lane (insert_job_compat's sticky rotor), so
-- this takes lane locks in the global order (docs/correctness.md, I5).
-- Returns one row per job enqueued (error NULL) and one per failed schedule.
CREATE OR REPLACE FUNCTION {schema}.fire_due_periodic(
    p_limit integer DEFAULT 100, p_catch_up_limit integer DEFAULT 100)
RETURNS TABLE (name text, occurrence timestamptz, job_id bigint, error text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v        {schema}.periodic_jobs%ROWTYPE;
    v_now    timestamptz := now();
    v_occ    timestamptz;
    v_next   timestamptz;
    v_occs   timestamptz[];
    v_ids    bigint[];
    v_msg    text;
    v_state  text;
BEGIN
    -- Most rounds nothing is due: one probe of periodic_jobs_due.
    IF NOT EXISTS (SELECT 1 FROM {schema}.periodic_jobs x
                   WHERE NOT x.paused AND x.next_fire_at <= v_now) THEN
        RETURN;
    END IF;
    FOR v IN
        SELECT d.*
        FROM (SELECT x.* FROM {schema}.periodic_jobs x
              WHERE NOT x.paused AND x.next_fire_at <= v_now
              ORDER BY x.last_error_at NULLS FIRST, x.next_fire_at
              LIMIT p_limit
              FOR UPDATE SKIP LOCKED) d
        ORDER BY d.queue COLLATE "C", d.priority, d.name COLLATE "C"
    LOOP
        v_occs := ARRAY[]::timestamptz[];
        v_ids := ARRAY[]::bigint[];
        BEGIN
            v_occ := v.next_fire_at;
            IF v.catch_up THEN
                WHILE v_occ IS NOT NULL AND v_occ <= v_now
                      AND cardinality(v_occs) < p_catch_up_limit LOOP
                    v_ids := v_ids || {schema}.periodic_enqueue(
                        v, v_occ, jsonb_build_object('periodic', v.name,
                                                     'occurrence', {schema}.iso_utc(v_occ)));
                    v_occs := v_occs || v_occ;
                    v_occ := {schema}.periodic_next(v, v_occ);
                END LOOP;
                v_next := v_occ;
            ELSE
                v_next := {schema}.periodic_next(v, v_occ);
                IF v_next IS NOT NULL AND v_next <= v_now THEN
                    v_occ := {schema}.periodic_latest(v, v_occ, v_now);
                    v_next := {schema}.periodic_next(v, v_occ);
                END IF;
                v_ids := v_ids || {schema}.periodic_enqueue(
                    v, v_occ, jsonb_build_object('periodic', v.name,
                                                 'occurrence', {schema}.iso_utc(v_occ)));
                v_occs := v_occs || v_occ;
            END IF;
            UPDATE {schema}.periodic_jobs x
            SET next_fire_at = coalesce(v_next, 'infinity'::timestamptz),
                last_fired_at = v_occs[cardinality(v_occs)],
                last_job_id = v_ids[cardinality(v_ids)],
                last_error = NULL,
                last_error_at = NULL,
                updated_at = v_now
            WHERE x.name = v.name AND x.next_fire_at = v.next_fire_at AND NOT x.paused;
            IF NOT FOUND THEN
                -- Rolls back this schedule's jobs: someone else fired (or paused) it.
                RAISE EXCEPTION 'periodic job %: next_fire_at changed while firing', v.name
                    USING ERRCODE = '40001';
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT, v_state = RETURNED_SQLSTATE;
            v_ids := ARRAY[]::bigint[];
            IF v_state <> '40001' THEN
                UPDATE {schema}.periodic_jobs x
                SET last_error = v_msg || ' [SQLSTATE ' || v_state || ']', last_error_at = v_now
                WHERE x.name = v.name;
            END IF;
            name := v.name;
            occurrence := v.next_fire_at;
            job_id := NULL;
            error := v_msg || ' [SQLSTATE ' || v_state || ']';
            RETURN NEXT;
        END;
        FOR i IN 1..cardinality(v_ids) LOOP
            name := v.name;
            occurrence := v_occs[i];
            job_id := v_ids[i];
            error := NULL;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;

-- Adds or updates a schedule (include/awa/periodic.hpp; the C++ side parsed and
-- validated it). p_source 'code': declared by a Client at start-up, last_declared_at =
-- now() (the transaction's start, the same for every schedule one start-up declares);
-- 'cli': awa cron add. An update keeps `paused`, and keeps next_fire_at unless the
-- expression or the zone changed (then: the first occurrence after now()).
-- Refuses (22023) an unknown zone and a schedule with no occurrence within 8 years.
CREATE OR REPLACE FUNCTION {schema}.upsert_periodic(
    p_name text, p_expression text, p_tz text,
    p_seconds integer[], p_minutes integer[], p_hours integer[], p_doms integer[],
    p_months integer[], p_dows integer[], p_dom_restricted boolean, p_dow_restricted boolean,
    p_every_seconds bigint, p_kind text, p_queue text, p_args jsonb, p_priority integer,
    p_max_attempts integer, p_tags text[], p_metadata jsonb, p_catch_up boolean,
    p_source text,
    OUT created boolean, OUT next_fire_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_next timestamptz;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid periodic job name "%": use 1..200 characters from A-Z a-z 0-9 _ . : -',
            p_name USING ERRCODE = '22023';
    END IF;
    -- An @every schedule never converts a local time, so check the zone explicitly.
    BEGIN
        PERFORM now() AT TIME ZONE p_tz;
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'periodic job %: unknown time zone "%"', p_name, p_tz
            USING ERRCODE = '22023',
                  HINT = 'use an IANA zone name such as UTC, Europe/Berlin or America/New_York (pg_timezone_names lists them)';
    END;
    PERFORM {schema}.validate_job(p_kind, p_args, p_queue, p_priority, p_max_attempts, NULL);
    PERFORM {schema}.validate_job_extras(p_metadata, p_tags, NULL);
    v_next := {schema}.cron_next(p_seconds, p_minutes, p_hours, p_doms, p_months, p_dows,
                                 p_dom_restricted, p_dow_restricted, p_every_seconds, p_tz, now());
    IF v_next IS NULL THEN
        RAISE EXCEPTION 'periodic job %: schedule "%" has no occurrence in the next 8 years',
            p_name, p_expression USING ERRCODE = '22023';
    END IF;
    INSERT INTO {schema}.periodic_jobs AS x
        (name, expression, tz, seconds, minutes, hours, doms, months, dows, dom_restricted,
         dow_restricted, every_seconds, kind, queue, args, priority, max_attempts, tags,
         metadata, catch_up, next_fire_at, source, last_declared_at)
    VALUES (p_name, p_expression, p_tz, p_seconds, p_minutes, p_hours, p_doms, p_months, p_dows,
            p_dom_restricted, p_dow_restricted, p_every_seconds, p_kind, p_queue, p_args,
            p_priority, p_max_attempts, p_tags, p_metadata, p_catch_up, v_next, p_source,
            CASE WHEN p_source = 'code' THEN now() END)
    ON CONFLICT ON CONSTRAINT periodic_jobs_pkey DO UPDATE
    SET expression = EXCLUDED.expression, tz = EXCLUDED.tz, seconds = EXCLUDED.seconds,
        minutes = EXCLUDED.minutes, hours = EXCLUDED.hours, doms = EXCLUDED.doms,
        months = EXCLUDED.months, dows = EXCLUDED.dows,
        dom_restricted = EXCLUDED.dom_restricted, dow_restricted = EXCLUDED.dow_restricted,
        every_seconds = EXCLUDED.every_seconds, kind = EXCLUDED.kind, queue = EXCLUDED.queue,
        args = EXCLUDED.args, priority = EXCLUDED.priority,
        max_attempts = EXCLUDED.max_attempts, tags = EXCLUDED.tags,
        metadata = EXCLUDED.metadata, catch_up = EXCLUDED.catch_up,
        next_fire_at = CASE WHEN x.expression IS DISTINCT FROM EXCLUDED.expression
                              OR x.tz IS DISTINCT FROM EXCLUDED.tz
                            THEN EXCLUDED.next_fire_at ELSE x.next_fire_at END,
        source = EXCLUDED.source,
        last_declared_at = CASE WHEN EXCLUDED.source = 'code' THEN now()
                                ELSE x.last_declared_at END,
        updated_at = now()
    RETURNING (xmax = 0), x.next_fire_at INTO created, next_fire_at;
END
$$;

-- Resume: occurrences while paused are skipped, not caught up: a next_fire_at that
-- passed becomes the first occurrence after now(). Returns false for no such schedule.
CREATE OR REPLACE FUNCTION {schema}.set_periodic_paused(p_name text, p_paused boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v {schema}.periodic_jobs%ROWTYPE;
BEGIN
    SELECT * INTO v FROM {schema}.periodic_jobs x WHERE x.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE {schema}.periodic_jobs x
    SET paused = p_paused,
        next_fire_at = CASE WHEN NOT p_paused AND x.paused AND x.next_fire_at <= now()
                            THEN coalesce({schema}.periodic_next(v, now()), 'infinity'::timestamptz)
                            ELSE x.next_fire_at END,
        updated_at = now()
    WHERE x.name = p_name;
    RETURN true;
END
$$;

-- Enqueues one job of the schedule now (paused or not), outside its series: next_fire_at
-- and last_fired_at are untouched; metadata {"periodic": name, "triggered_at": now}.
-- NULL for no such schedule.
CREATE OR REPLACE FUNCTION {schema}.trigger_periodic(p_name text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v {schema}.periodic_jobs%ROWTYPE;
BEGIN
    SELECT * INTO v FROM {schema}.periodic_jobs x WHERE x.name = p_name;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN {schema}.periodic_enqueue(
        v, now(), jsonb_build_object('periodic', v.name, 'triggered_at', {schema}.iso_utc(now())));
END
$$;
