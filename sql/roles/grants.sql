-- awa roles setup, step 2: what each role may do in this schema (docs: include/awa/admin.hpp,
-- Admin::setup_roles). Runs in one transaction; it first revokes everything the three
-- roles hold here, so a re-run converges on exactly this file, and other sessions never
-- see the gap between the revoke and the grants.
--
-- {producer}: enqueue only. The C++ producer (src/storage/enqueue*.cpp, sql/queries/enqueue)
--   reads queue_meta's shard counts and queue_ids, INSERTs (or COPYs) into ready_entries
--   and deferred_jobs (inside a caller's transaction into enqueue_staging instead, whose
--   commit trigger place_staged_jobs is SECURITY DEFINER), takes job ids from job_ids,
--   and reserves lanes through ensure_lane and reserve_lane_range — SECURITY DEFINER (sql/security/function_settings.sql). Its
--   one-job path (sql/queries/enqueue/insert_one.sql: a self-committing insert of one job
--   to a lane it has seen) does in one plain statement what reserve_lane_range does, so
--   it reads the lane heads' key columns and the queue ring's ledger, advances the lane
--   sequences and INSERTs into the ready partitions directly. The SQL producers
--   (insert_job_compat, insert_jobs_compat) are SECURITY INVOKER and need the same plus
--   compat_rotor and the routing and validation functions they call. Unique jobs go
--   through insert_job_compat, whose key claim (claim_unique_key) is SECURITY DEFINER as
--   well: the producer holds no privilege on unique_keys. Jobs with parents go through
--   enqueue_after, SECURITY DEFINER likewise (0067_dependencies.sql), and batch members
--   through add_batch_members (0069_batches.sql), also SECURITY DEFINER. ready_entries grants
--   SELECT on (lane_seq, job_id) only, for INSERT ... RETURNING: a producer can see which
--   job ids exist but not one column of any job's data (kind, args, metadata ...).
--   Before routing keyed jobs it takes the queues' reshard locks and has its shard counts
--   checked (check_shard_counts, sql/functions/0022_shard_fences.sql).
--   Advisory locks and NOTIFY need no privilege.
-- {worker}: claim, complete, heartbeat, read its jobs, and everything the maintenance
--   leader of `awa work` does (promotion, rescue, ring rotation and prune, DLQ purge):
--   the functions are SECURITY INVOKER, so the worker holds the table privileges they
--   use — SELECT, INSERT, UPDATE, DELETE on the queue tables, TRUNCATE on the ring
--   partitions only (prune), the sequences. It reads but cannot change queue_meta
--   (queue settings) or the migration ledgers. It writes runtime_instances: each Client
--   registers there, marks itself seen, records its leader ticks and removes itself, and
--   the leader deletes rows of dead instances.
--   Periodic jobs (periodic_jobs): the worker fires them (the leader's UPDATE of
--   next_fire_at) and a Client upserts the schedules it declares (INSERT, UPDATE), but
--   cannot DELETE one.
-- {admin}: the worker's privileges plus writes to queue_meta (set-shards, pause, DLQ
--   settings) and removing periodic jobs: every Admin and PeriodicAdmin function and
--   `awa queue|storage|health|cron` command (health reads schema_migrations,
--   runtime_instances and the lane tables).
-- The producer cannot see runtime_instances (hostnames, pids).
-- None of the three owns anything, so none can ALTER or DROP a table or function, or run
-- migrations: the schema's owner does that (`awa migrate`), then re-runs this setup.

GRANT USAGE ON SCHEMA {schema} TO {producer}, {worker}, {admin};

REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {producer}, {worker}, {admin};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {producer}, {worker}, {admin};
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {producer}, {worker}, {admin};
-- PostgreSQL grants EXECUTE on every new function to PUBLIC; here only the roles granted
-- below (and the owner) may call this schema's functions. A function file the migrator
-- later re-creates with DROP + CREATE is PUBLIC again until this runs again; that opens
-- nothing, because every function but the two lane functions runs with the caller's
-- table privileges.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} FROM PUBLIC;

-- Producer.
GRANT SELECT ON {schema}.queue_meta TO {producer};
GRANT INSERT ON {schema}.ready_entries, {schema}.deferred_jobs, {schema}.enqueue_staging TO {producer};
GRANT SELECT (lane_seq, job_id) ON {schema}.ready_entries TO {producer};
GRANT USAGE ON SEQUENCE {schema}.job_ids, {schema}.compat_rotor TO {producer};
GRANT SELECT (queue_id, priority, enqueue_shard, lane_id, seq) ON {schema}.queue_enqueue_heads TO {producer};
GRANT SELECT ON {schema}.queue_ids TO {producer};
GRANT SELECT (ring, generation, slot) ON {schema}.ring_rotations TO {producer};

-- Worker and admin.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {worker}, {admin};
REVOKE INSERT, UPDATE, DELETE ON {schema}.queue_meta, {schema}.schema_migrations,
    {schema}.schema_functions, {schema}.schema_catalogue FROM {worker}, {admin};
GRANT INSERT, UPDATE, DELETE ON {schema}.queue_meta TO {admin};
REVOKE DELETE ON {schema}.periodic_jobs FROM {worker};
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {worker}, {admin};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {worker}, {admin};

DO $awa_grants$
DECLARE
    f record;
    t record;
    v_owner text;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS sig
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = '{schema}'::regnamespace
          AND p.proname IN ('insert_job_compat', 'insert_jobs_compat', 'ensure_lane',
                            'reserve_lane_range', 'notify_channel', 'validate_job',
                            'validate_metadata', 'validate_job_extras', 'queue_shard_count', 'queue_id_of', 'shard_for_ordering_key',
                            'ordering_key_hash', 'unique_spec', 'unique_key', 'claim_unique_key',
                            'claim_unique_keys', 'set_unique_key_holders', 'check_job_state',
                            'hold_shard_counts', 'check_shard_counts', 'enqueue_after',
                            'add_batch_members', 'check_batch_name')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO {producer}', f.sig);
    END LOOP;

    -- Prune truncates one slot's partitions; never the parent tables.
    FOR t IN
        SELECT c.oid::regclass AS rel
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = '{schema}'::regnamespace AND c.relispartition
          AND c.relkind IN ('r', 'p')
    LOOP
        EXECUTE format('GRANT TRUNCATE ON %s TO {worker}, {admin}', t.rel);
    END LOOP;

    -- The one-job path's partitions and lane sequences (lanes created later: the
    -- default privileges below).
    FOR t IN
        SELECT i.inhrelid::regclass AS rel
        FROM pg_catalog.pg_inherits i
        WHERE i.inhparent = '{schema}.ready_entries'::regclass
    LOOP
        EXECUTE format('GRANT INSERT, SELECT (job_id) ON %s TO {producer}', t.rel);
    END LOOP;
    FOR t IN
        SELECT h.seq AS rel FROM {schema}.queue_enqueue_heads h
    LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %s TO {producer}', t.rel);
    END LOOP;

    -- Views (attempt_outcomes) are read-only.
    FOR t IN
        SELECT c.oid::regclass AS rel
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind = 'v'
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON %s FROM {worker}, {admin}', t.rel);
    END LOOP;

    -- Lane sequences are created later, by ensure_lane running as its owner; the queue
    -- shard view reads them (pg_sequence_last_value).
    SELECT pg_catalog.pg_get_userbyid(p.proowner) INTO v_owner
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = '{schema}'::regnamespace AND p.proname = 'ensure_lane';
    IF v_owner IS NOT NULL THEN
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %s '
                       'GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {worker}, {admin}',
                       v_owner, '{schema}');
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %s '
                       'GRANT USAGE ON SEQUENCES TO {producer}',
                       v_owner, '{schema}');
    END IF;
END
$awa_grants$;
