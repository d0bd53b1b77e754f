-- Keyed jobs run once, out of producer order per key (other shard, or lane_seq not after the
-- predecessor's). No parameters; rows start with the count checked; a last all-NULL row.
WITH once AS (
    SELECT l.okey, l.seq, l.job_id, r.enqueue_shard, r.lane_seq
    FROM chaos.ledger l
    JOIN chaos.ready r ON r.job_id = l.job_id AND r.run_lease = 0
    WHERE l.committed AND l.okey IS NOT NULL
      AND (SELECT count(*) FROM chaos.outcomes o WHERE o.job_id = l.job_id) = 1),
ordered AS (
    SELECT o.*, lag(o.enqueue_shard) OVER w AS prev_shard, lag(o.lane_seq) OVER w AS prev_seq,
           lag(o.job_id) OVER w AS prev_job
    FROM once o WINDOW w AS (PARTITION BY o.okey ORDER BY o.seq))
SELECT (SELECT count(*) FROM once), okey, job_id, prev_job, enqueue_shard, prev_shard, lane_seq,
       prev_seq
FROM ordered
WHERE prev_job IS NOT NULL AND (enqueue_shard <> prev_shard OR lane_seq <= prev_seq)
UNION ALL
SELECT (SELECT count(*) FROM once), NULL, NULL, NULL, NULL, NULL, NULL, NULL
