-- Shard routing and input validation shared by every SQL producer. C++ implements the
-- same hash in src/storage/routing.cpp; tests check that both agree bit for bit.

-- The portable 64-bit rolling hash of docs/design/engine.md (multiply, then add; not FNV-1a):
--   h = 14695981039346656037; for each byte b: h = (h * 1099511628211 + b) mod 2^64
-- NUMERIC keeps the arithmetic exact without relying on bigint wrap-around, which
-- PostgreSQL reports as an error.
CREATE OR REPLACE FUNCTION {schema}.ordering_key_hash(p_key bytea)
RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    h numeric := 14695981039346656037;
    i integer;
BEGIN
    FOR i IN 0 .. length(p_key) - 1 LOOP
        h := mod(h * 1099511628211 + get_byte(p_key, i), 18446744073709551616);
    END LOOP;
    RETURN h;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.shard_for_ordering_key(p_key bytea, p_shards integer)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF p_shards < 1 OR p_shards > 64 THEN
        RAISE EXCEPTION 'shard count % is outside the allowed range 1..64', p_shards
            USING ERRCODE = '22023';
    END IF;
    RETURN mod({schema}.ordering_key_hash(p_key), p_shards)::integer;
END
$$;

-- The queue's current shard count; no queue_meta row means 1.
CREATE OR REPLACE FUNCTION {schema}.queue_shard_count(p_queue text)
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT enqueue_shards FROM {schema}.queue_meta WHERE queue = p_queue), 1)::integer
$$;

-- A queue's fixed-width key in the hot tables (migration 0018), NULL for a queue that
-- has never had a lane. Functions take queue names and translate here, at their edge.
CREATE OR REPLACE FUNCTION {schema}.queue_id_of(p_queue text)
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT i.queue_id FROM {schema}.queue_ids i WHERE i.queue = p_queue
$$;

-- The queue's id, given to the name now if it has none. Callers: ensure_lane (as the
-- schema's owner, for a queue's first lane) and cancel_job (the done row of a scheduled
-- job whose queue never had a lane). An id is never reused: one whose creating
-- transaction rolled back is a gap. Two first lanes of a new queue in concurrent transactions: the
-- second INSERT waits for the first and, once it commits, reads its id in a new
-- statement; under REPEATABLE READ that read cannot see it, which is a serialization
-- failure for the caller to retry.
CREATE OR REPLACE FUNCTION {schema}.ensure_queue_id(p_queue text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_id integer;
BEGIN
    SELECT i.queue_id INTO v_id FROM {schema}.queue_ids i WHERE i.queue = p_queue;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    INSERT INTO {schema}.queue_ids (queue) VALUES (p_queue)
    ON CONFLICT (queue) DO NOTHING
    RETURNING queue_id INTO v_id;
    IF v_id IS NULL THEN
        SELECT i.queue_id INTO v_id FROM {schema}.queue_ids i WHERE i.queue = p_queue;
        IF v_id IS NULL THEN
            RAISE EXCEPTION 'queue % was given its id by a transaction this one cannot see; retry', p_queue
                USING ERRCODE = '40001';
        END IF;
    END IF;
    RETURN v_id;
END
$$;

-- The same rules as src/storage/validate.cpp (with validate_job_extras below); limits are
-- documented in docs/api.md. Invalid UTF-8 and NUL never get this far: the server
-- rejects them when it parses the text and jsonb parameters.
-- Raises 22023 (invalid_parameter_value) naming the field, before anything is written.
CREATE OR REPLACE FUNCTION {schema}.validate_job(
    p_kind text, p_args jsonb, p_queue text, p_priority integer, p_max_attempts integer,
    p_ordering_key bytea)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_kind IS NULL OR p_kind = '' OR octet_length(p_kind) > 200 THEN
        RAISE EXCEPTION 'job kind must be 1..200 bytes' USING ERRCODE = '22023';
    END IF;
    IF p_queue IS NULL OR p_queue !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid queue name "%": use 1..200 characters from A-Z a-z 0-9 _ . : -', p_queue
            USING ERRCODE = '22023';
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN 1 AND 4 THEN
        RAISE EXCEPTION 'priority % is outside 1..4', p_priority USING ERRCODE = '22023';
    END IF;
    IF p_max_attempts IS NULL OR p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'max_attempts % is outside 1..1000', p_max_attempts USING ERRCODE = '22023';
    END IF;
    IF p_args IS NULL THEN
        RAISE EXCEPTION 'job args must be JSON, not NULL' USING ERRCODE = '22023';
    END IF;
    -- jsonb's text rendering, which may differ in length a little from the client's text
    IF octet_length(p_args::text) > 1048576 THEN
        RAISE EXCEPTION 'job args are % bytes of JSON; the limit is 1 MiB', octet_length(p_args::text)
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_ordering_key) > 256 THEN
        RAISE EXCEPTION 'ordering_key is % bytes; the limit is 256', octet_length(p_ordering_key)
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- Job metadata is a JSON object or NULL, at most 64 KiB (the C++ producer's rule). A
-- trace context in it (the W3C header names "traceparent" and "tracestate": how a producer
-- in another language passes its trace on) must be valid, as trace::invalid_reason asks.
CREATE OR REPLACE FUNCTION {schema}.validate_metadata(p_metadata jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_parent text;
    v_state text;
BEGIN
    IF p_metadata IS NOT NULL AND jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object, not %', jsonb_typeof(p_metadata)
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_metadata::text) > 65536 THEN
        RAISE EXCEPTION 'metadata is % bytes of JSON; the limit is 64 KiB', octet_length(p_metadata::text)
            USING ERRCODE = '22023';
    END IF;
    IF p_metadata ? 'traceparent' OR p_metadata ? 'tracestate' THEN
        IF jsonb_typeof(p_metadata->'traceparent') IS DISTINCT FROM 'string'
           OR jsonb_typeof(coalesce(p_metadata->'tracestate', '""')) <> 'string' THEN
            RAISE EXCEPTION 'metadata.traceparent (and metadata.tracestate, if given) must be strings'
                USING ERRCODE = '22023';
        END IF;
        v_parent := p_metadata->>'traceparent';
        v_state := coalesce(p_metadata->>'tracestate', '');
        IF v_parent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
           OR substr(v_parent, 4, 32) = repeat('0', 32)
           OR substr(v_parent, 37, 16) = repeat('0', 16) THEN
            RAISE EXCEPTION 'metadata.traceparent % is not a W3C trace context', to_jsonb(left(v_parent, 80))
                USING ERRCODE = '22023',
                      HINT = 'version 00: 00-<32 lower-case hex digits>-<16>-<2>, ids not all zero';
        END IF;
        IF octet_length(v_state) > 512 OR v_state ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'metadata.tracestate is over 512 bytes or has a control character'
                USING ERRCODE = '22023';
        END IF;
    END IF;
END
$$;

-- Metadata, tags (at most 32, each at most 255 bytes) and run_at (at most 100 years
-- ahead), as the C++ producer checks them.
CREATE OR REPLACE FUNCTION {schema}.validate_job_extras(
    p_metadata jsonb, p_tags text[], p_run_at timestamptz)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM {schema}.validate_metadata(p_metadata);
    IF cardinality(p_tags) > 32 THEN
        RAISE EXCEPTION '% tags; the limit is 32', cardinality(p_tags) USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_tags) t WHERE t IS NULL OR octet_length(t) > 255) THEN
        RAISE EXCEPTION 'a tag is NULL or longer than 255 bytes' USING ERRCODE = '22023';
    END IF;
    IF p_run_at > now() + interval '3155760000 seconds' THEN
        RAISE EXCEPTION 'run_at % is more than 100 years ahead', p_run_at USING ERRCODE = '22023';
    END IF;
END
$$;

-- The NOTIFY channel of a queue. PostgreSQL caps channel names at 63 bytes, and queue
-- names may be 200: a name that does not fit is replaced by its ordering-key hash. The
-- C++ twin is awa::notify_channel(); producers and listeners both use these.
CREATE OR REPLACE FUNCTION {schema}.notify_channel(p_queue text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(p_queue) <= 59 THEN 'awa:' || p_queue
                ELSE 'awa:#' || {schema}.ordering_key_hash(convert_to(p_queue, 'UTF8'))::text END
$$;
