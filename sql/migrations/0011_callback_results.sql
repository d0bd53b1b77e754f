-- What the other system answered (issue 14; docs/scheduling.md, "External callbacks"):
-- Admin::complete_external(id, result) keeps the result on the attempt's done row. A
-- success normally writes no per-job row (its claim_closures row counts it); a success
-- that carries a result is closed like the other ends instead: a done row in state
-- 'completed' on the ready row's key, which every reader already counts once (the rows
-- that predate migration 0002 look the same), and a 'closed' closure, which no reader
-- counts as a success. The column is last, so the prune carry's positional INSERT of
-- failed rows stays valid; it lives in the queue ring and goes with its slot.
ALTER TABLE {schema}.done_entries ADD COLUMN result jsonb;
