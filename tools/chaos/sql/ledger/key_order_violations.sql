-- Keyed jobs run once, out of producer order per key. On one shard: lane_seq not after the
-- predecessor's. On another shard (the key moved with a change of the shard count): its
-- claim batch was written before the predecessor's (chaos.claims, run/record_claims.sql:
-- a claim that may take the job only after the predecessor's claim committed writes its
-- batch later). Pairs without a recorded claim are not judged. No parameters; every row
-- starts with the keyed jobs checked, the pairs on two shards and how many of those were
-- judged; a last row with the rest NULL.
WITH once AS (
    SELECT l.okey, l.seq, l.job_id, r.enqueue_shard, r.lane_seq,
           -- A lane's first claims do not overlap: the one with the greatest first_seq
           -- not above the row's is the only candidate (one index probe, not a scan).
           (SELECT CASE WHEN b.last_seq >= r.lane_seq THEN b.written_at END
            FROM chaos.claims b
            WHERE b.queue_id = r.queue_id AND b.priority = r.priority
              AND b.enqueue_shard = r.enqueue_shard AND b.first_seq <= r.lane_seq
            ORDER BY b.first_seq DESC LIMIT 1) AS claimed_at
    FROM chaos.ledger l
    JOIN chaos.ready r ON r.job_id = l.job_id AND r.run_lease = 0
    WHERE l.committed AND l.okey IS NOT NULL
      AND (SELECT count(*) FROM chaos.outcomes o WHERE o.job_id = l.job_id) = 1),
ordered AS (
    SELECT o.*, lag(o.enqueue_shard) OVER w AS prev_shard, lag(o.lane_seq) OVER w AS prev_seq,
           lag(o.job_id) OVER w AS prev_job, lag(o.claimed_at) OVER w AS prev_claimed_at
    FROM once o WINDOW w AS (PARTITION BY o.okey ORDER BY o.seq)),
judged AS (
    SELECT o.*,
           CASE WHEN o.enqueue_shard = o.prev_shard THEN o.lane_seq <= o.prev_seq
                ELSE o.claimed_at < o.prev_claimed_at END AS out_of_order
    FROM ordered o
    WHERE o.prev_job IS NOT NULL)
SELECT (SELECT count(*) FROM once),
       (SELECT count(*) FROM judged j WHERE j.enqueue_shard <> j.prev_shard),
       (SELECT count(*) FROM judged j WHERE j.enqueue_shard <> j.prev_shard
                                         AND j.out_of_order IS NOT NULL),
       okey, job_id, prev_job, enqueue_shard, prev_shard, lane_seq, prev_seq
FROM judged
WHERE out_of_order
UNION ALL
SELECT (SELECT count(*) FROM once),
       (SELECT count(*) FROM judged j WHERE j.enqueue_shard <> j.prev_shard),
       (SELECT count(*) FROM judged j WHERE j.enqueue_shard <> j.prev_shard
                                         AND j.out_of_order IS NOT NULL),
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
