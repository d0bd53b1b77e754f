-- Caller-owned finalization (docs/workflows.md, "Exactly-once effects"): a handler completes
-- its own attempt inside its own transaction, beside its business writes, so the job is
-- completed if and only if that transaction commits.
--
-- It is close_attempts for one attempt, run in the caller's transaction: the attempt's
-- claim-batch lock (attempt_lock_key, exclusive) is held until that transaction ends, so
-- a rescue, a cancel or the runtime's own completion of the same attempt waits for it and
-- then finds the attempt closed; and one that closed the attempt first makes this call
-- raise 55000 (object_not_in_prerequisite_state), which aborts the caller's transaction:
-- nothing of it applies. READ COMMITTED only: close_attempts decides in a statement whose
-- snapshot postdates the lock; a REPEATABLE READ snapshot taken earlier could miss a
-- closure committed meanwhile and close the attempt twice (0A000 otherwise).
--
-- The lock covers the whole claim batch (up to claim_batch attempts): until the caller
-- commits, heartbeats and completions of the other jobs of that batch wait. Call it last,
-- just before COMMIT.
CREATE OR REPLACE FUNCTION {schema}.finalize_attempt(
    p_claim_batch bigint, p_lane_seq bigint, p_result jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'finalize_attempt: call it in a READ COMMITTED transaction (this one is %)',
            upper(current_setting('transaction_isolation')) USING ERRCODE = '0A000';
    END IF;
    IF p_claim_batch IS NULL OR p_lane_seq IS NULL THEN
        RAISE EXCEPTION 'finalize_attempt: the claim batch and lane_seq are required'
            USING ERRCODE = '22023';
    END IF;
    SELECT c.state INTO v_state
    FROM {schema}.close_attempts(ARRAY[p_claim_batch], ARRAY[p_lane_seq], ARRAY['completed'],
                                 NULL, NULL,
                                 CASE WHEN p_result IS NOT NULL THEN ARRAY[p_result] END) c;
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'finalize_attempt: the attempt (claim batch %, lane_seq %) is no longer current: it was rescued, cancelled or already ended',
            p_claim_batch, p_lane_seq
            USING ERRCODE = '55000',
                  HINT = 'Nothing of this transaction may commit: roll it back. The job''s current attempt, if any, runs on its own.';
    END IF;
    RETURN v_state;
END
$$;
