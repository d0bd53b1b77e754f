-- The attempt ends of a rings schema (job_id, run_lease, state), as the view
-- attempt_outcomes (sql/functions/0090_views.sql) reads them, with the success expansion
-- first as the fault harness does: each completed claim closure expanded to its lane_seqs
-- and matched to the ready entries copied into {lschema}.ready, then done_entries.
-- A query (no trailing semicolon), put into snapshot.sql as {outcomes}.
-- Parameters: {schema} the rehearsal schema; {lschema} the ledger schema; {expand}
-- expand_lane_seqs_array.sql or expand_lane_seqs_ranges.sql; {qcol} the lanes' queue
-- column (queue_key_column.sql).
WITH closed AS MATERIALIZED (
    SELECT b.{qcol}, b.priority, b.enqueue_shard, s.lane_seq, c.closed_at
    FROM {schema}.claim_closures c
    JOIN {schema}.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
    {expand}
    WHERE c.outcome = 'completed')
SELECT r.job_id, r.run_lease + 1 AS run_lease, 'completed'::text AS state
FROM closed c JOIN {lschema}.ready r USING ({qcol}, priority, enqueue_shard, lane_seq)
UNION ALL
SELECT d.job_id, d.run_lease, d.state FROM {schema}.done_entries d
