-- Jobs enqueued after parents that were claimed before a parent had ended
-- (docs/workflows.md, "Dependencies"): each edge's child's first claim (chaos.claims: the
-- server's clock when the claim batch was written) against its parent's terminal end (the
-- earliest finished_at of its terminal outcomes; a completed one is its closure's
-- closed_at, the closer transaction's start, before the child can be released). No
-- parameters; one row: (edges judged, then the violations as text, at most 20).
WITH ends AS (
    SELECT o.job_id, min(o.finished_at) AS ended_at
    FROM chaos.outcomes o
    WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')
    GROUP BY o.job_id),
claimed AS (
    SELECT r.job_id, min(c.written_at) AS claimed_at
    FROM chaos.ready r
    JOIN chaos.claims c
      ON c.queue_id = r.queue_id AND c.priority = r.priority AND c.enqueue_shard = r.enqueue_shard
     AND r.lane_seq BETWEEN c.first_seq AND c.last_seq
    WHERE r.job_id IN (SELECT d.child_id FROM awa.job_dependencies d)
    GROUP BY r.job_id),
judged AS (
    SELECT d.parent_id, d.child_id, c.claimed_at, e.ended_at
    FROM awa.job_dependencies d
    JOIN claimed c ON c.job_id = d.child_id
    LEFT JOIN ends e ON e.job_id = d.parent_id)
SELECT (SELECT count(*) FROM judged),
       (SELECT string_agg(format('job %s claimed at %s, its parent %s ended at %s', j.child_id,
                                 j.claimed_at, j.parent_id, coalesce(j.ended_at::text, 'never')),
                          '; ')
        FROM (SELECT * FROM judged
              WHERE ended_at IS NULL OR claimed_at < ended_at
              ORDER BY child_id LIMIT 20) j),
       (SELECT count(*) FROM judged WHERE ended_at IS NULL OR claimed_at < ended_at)
