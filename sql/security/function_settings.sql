-- Function attributes, applied by the migrator after every function file (it re-runs
-- this file on every migrate; it changes only what differs, so a no-op migrate writes
-- nothing). CREATE OR REPLACE resets a function's SECURITY and SET clauses, which is
-- why they are set here, once, and not in each function file.
--
-- 1. A fixed search_path: every function gets `search_path = pg_catalog, pg_temp`.
--    Every name of this schema in a function body is already qualified ({schema}.x), so
--    the path only decides where built-ins and operators come from: pg_catalog first,
--    and pg_temp last, so a temporary table or function can never shadow anything
--    (leaving pg_temp out would put it first for relations). A caller's own
--    search_path therefore never changes what a function does, which is what makes the
--    SECURITY DEFINER functions below safe to call from a less privileged role
--    (PostgreSQL never looks up functions or operators in pg_temp).
--    Exempt: plain SQL functions that PostgreSQL inlines (LANGUAGE sql, STABLE or
--    IMMUTABLE, no SET clause, not SECURITY DEFINER). A SET clause stops inlining — and
--    the claim depends on lane_heads_in_slot and effective_priority being inlined
--    (0040_claim_ready_runtime.sql).
--    An inlined body becomes part of the calling statement, so it resolves names under
--    the caller's path: the pinned path when the caller is one of these functions, the
--    session's (pg_catalog implicitly first) when it is a query of the C++ code; its
--    relation names are qualified either way.
-- 2. SECURITY DEFINER for the two lane functions the producers call (the C++ producer
--    directly, the SQL producers through reserve_lane_range): creating a lane creates a
--    sequence (CREATE on the schema) and reserving a range advances the lane's sequence
--    and locks the ready partition. As definer functions they need no grant on any of
--    that, so awa_producer gets EXECUTE on them plus INSERT-only table grants
--    (sql/roles/grants.sql). They touch only qualified tables of this schema — no
--    temporary table, which a caller could have created first with a trigger of its own
--    that would then run as the owner; that is why insert_job_compat and
--    insert_jobs_compat (awa_compat_batch) stay SECURITY INVOKER.
--    claim_unique_key (unique jobs, 0025_unique.sql) is SECURITY DEFINER for the same
--    reason (and set_unique_key_holders, which names the holders of keys claimed for a
--    placeholder by a call's claim_unique_keys): it writes unique_keys and reads a key
--    holder's state through job_states,
--    so the producer needs no privilege on unique_keys or on any table job_states
--    reads, and learns only a holder's id and state. Every other function acts with the
--    caller's privileges, so a role without them gets SQLSTATE 42501.
--    place_staged_jobs (0032_enqueue_staging.sql), the commit trigger that moves a
--    transaction's staged jobs into their lanes, is SECURITY DEFINER too: the producer
--    holds INSERT on enqueue_staging only, and cannot read other transactions' pending
--    jobs. It uses no temporary table.
--    enqueue_after (0067_dependencies.sql), the enqueue of a job after its parents, is
--    SECURITY DEFINER for the same reason as claim_unique_key: it reads the parents'
--    states through job_states and writes the dependency tables, and a parent that had
--    already failed ends the job at once (its done row); the producer holds no privilege
--    on any of those tables and learns only the new job's id and state.
--    add_batch_members (0069_batches.sql), which makes a producer's new jobs members of an
--    open batch, is SECURITY DEFINER likewise: it locks and reads the batch row and writes
--    batch_members, which the producer has no privilege on.
--    shard_fence_now (0022_shard_fences.sql), which a claim calls to lift a drained
--    shard fence, is SECURITY DEFINER so that it may clear queue_meta.shard_fence: the
--    worker reads queue_meta but may not write it.
DO $awa_settings$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS sig, p.proname, p.prosecdef, p.proconfig,
               l.lanname, p.provolatile
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = '{schema}'::regnamespace AND p.prokind = 'f'
    LOOP
        IF f.proname IN ('ensure_lane', 'reserve_lane_range', 'claim_unique_key',
                         'set_unique_key_holders', 'place_staged_jobs', 'shard_fence_now',
                         'enqueue_after', 'add_batch_members') THEN
            IF NOT f.prosecdef THEN
                EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f.sig);
            END IF;
        ELSIF f.lanname = 'sql' AND NOT f.prosecdef AND f.proconfig IS NULL
              AND f.provolatile IN ('i', 's') THEN
            CONTINUE;  -- inlined: see 1.
        END IF;
        IF f.proconfig IS NULL
           OR NOT ('search_path=pg_catalog, pg_temp' = ANY (f.proconfig)) THEN
            EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f.sig);
        END IF;
    END LOOP;
END
$awa_settings$;
