-- Seconds from the first claim to the last attempt's end, as the server recorded them
-- (claim_batches.claimed_at; successes' claim_closures.closed_at, other ends'
-- done_entries.finished_at): the drain without the workers' start-up. No parameters.
SELECT extract(epoch FROM
           greatest((SELECT max(closed_at) FROM awa.claim_closures),
                    (SELECT max(finished_at) FROM awa.done_entries))
           - (SELECT min(claimed_at) FROM awa.claim_batches))::float8
