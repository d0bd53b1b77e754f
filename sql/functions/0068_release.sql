-- Handing back attempts that were claimed but never started (a worker stopping with
-- prefetched jobs, docs/runtime.md "Prefetch"): each is closed like a snooze — the
-- attempt is given back, nothing is appended to the job's errors, the attempt history
-- records 'snoozed' with p_reason — and promoted to ready in the same transaction, so
-- any claimer can take it at once instead of after a rescue or the leader's next round.
-- Promotion routes it like any enqueue (a keyed job to its key's shard of the current
-- width, at the lane's tail). Attempts already closed (cancelled, rescued meanwhile) are
-- left alone. Returns the number of jobs handed back.
CREATE OR REPLACE FUNCTION {schema}.release_attempts(
    p_batches bigint[],
    p_lane_seqs bigint[],
    p_job_ids bigint[],
    p_reason text)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    v_n   integer := coalesce(cardinality(p_batches), 0);
    v_ids bigint[];
BEGIN
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    IF coalesce(cardinality(p_job_ids), 0) <> v_n THEN
        RAISE EXCEPTION 'release_attempts: the input arrays differ in length' USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(p_job_ids[c.ord])
    INTO v_ids
    FROM {schema}.close_attempts(p_batches, p_lane_seqs, array_fill('snooze'::text, ARRAY[v_n]),
                                 array_fill(p_reason, ARRAY[v_n]),
                                 array_fill(0::double precision, ARRAY[v_n])) c
    WHERE c.state = 'snoozed';
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    -- A new statement: it sees the deferred rows close_attempts just wrote.
    RETURN {schema}.promote_deferred(cardinality(v_ids), v_ids);
END
$$;
