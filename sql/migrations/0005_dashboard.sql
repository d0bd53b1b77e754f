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

-- Per-minute job ends and claims of the history prune removes for good, so the rates stay
-- exact once the rings have turned (the leader rotates every few seconds): the rate
-- queries add these rows to what the rings still hold, as queue_counts_exact adds
-- terminal_rollups. Prune writes them in the same transaction as the TRUNCATE
-- (sql/functions/0080_rings.sql), excluding what it carries, so every end and claim is
-- counted in exactly one place at every snapshot. Per lane, because shard_claims reports
-- per (priority, enqueue_shard); throughput sums the lanes. Rows older than two days (the
-- widest rate window is one) are deleted by prune too, through the minute index.
CREATE TABLE {schema}.minute_rollups (
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    minute        timestamptz NOT NULL,
    completed     bigint      NOT NULL DEFAULT 0,
    failed        bigint      NOT NULL DEFAULT 0,
    claims        bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute, priority, enqueue_shard)
);
CREATE INDEX minute_rollups_minute ON {schema}.minute_rollups (minute);
