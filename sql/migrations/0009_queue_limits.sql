-- Rate limits and a global concurrency limit per queue (issue 14; docs/scheduling.md
-- "Rate limits and concurrency"). Both are enforced inside claim_ready_runtime, so every
-- worker process of the database obeys them; a queue with none of them set claims exactly
-- as before.
--   max_rate            claims per second of the queue, all processes together (a token
--                       bucket); NULL: unlimited;
--   burst               the bucket's size: claims that may be made at once after a quiet
--                       spell; NULL: max(1, ceil(max_rate));
--   global_max_workers  attempts of the queue open at once, all processes together
--                       (claimed and not yet closed, prefetched ones included); NULL: none.
ALTER TABLE {schema}.queue_meta
    ADD COLUMN max_rate double precision
        CONSTRAINT queue_meta_max_rate_check CHECK (max_rate > 0 AND max_rate <= 1000000),
    ADD COLUMN burst integer
        CONSTRAINT queue_meta_burst_check CHECK (burst BETWEEN 1 AND 1000000),
    ADD COLUMN global_max_workers integer
        CONSTRAINT queue_meta_global_max_workers_check CHECK (global_max_workers BETWEEN 1 AND 100000);

-- One token bucket per rate-limited queue, created by its first claim (full). A claimer
-- locks the row, refills it for the time elapsed, claims at most floor(tokens) and then
-- takes what it claimed out of it, all in its claim transaction: the row lock orders the
-- claimers of the queue, so the rate holds across processes. Not tied to a ring: one small
-- row per queue, updated in place (HOT: no indexed column changes).
CREATE TABLE {schema}.queue_rate_buckets (
    queue       text             PRIMARY KEY,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL
);

-- The global concurrency limit counts the queue's open attempts (its claim batches' items
-- minus their closed items) at every claim of the queue: per queue, not over the whole
-- claim ring.
CREATE INDEX claim_batches_queue ON {schema}.claim_batches (queue, batch_id) INCLUDE (n_items);
