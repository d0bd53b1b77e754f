-- The dashboard's per-minute rates (issue 13; Admin::throughput, Admin::shard_claims) scan
-- job ends by time: done_entries.finished_at (failures and other non-successful ends) and
-- claim_closures.closed_at (successes). Without an index every call reads whole
-- partitions. BRIN, not B-tree, as for the job-id indexes of 0003: both tables are
-- append-only and written in nearly ascending time order (the writer's now()),
-- so a BRIN summary is small and almost free on the completion hot path, where a B-tree
-- would add an index insert per row. Rows prune carries forward keep their times; they
-- only widen the summary of the blocks they land in.
-- Claims need nothing new: claim_batches_claimed_at (0002) already serves rescue's scans.
CREATE INDEX done_entries_finished_at ON {schema}.done_entries USING brin (finished_at);
CREATE INDEX claim_closures_closed_at ON {schema}.claim_closures USING brin (closed_at);
