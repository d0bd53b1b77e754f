-- Committed jobs with more than one attempt, and jobs whose terminal end is not the one
-- their kind should reach (informational). No parameters.
WITH per AS (
    SELECT l.kind, l.job_id, count(*) AS attempts,
           max(o.state) FILTER (WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')) AS fin
    FROM chaos.ledger l JOIN chaos.outcomes o ON o.job_id = l.job_id
    WHERE l.committed GROUP BY l.kind, l.job_id)
SELECT count(*) FILTER (WHERE attempts > 1),
       count(*) FILTER (WHERE (kind = 'fail' AND fin <> 'failed')
                           OR (kind <> 'fail' AND fin <> 'completed'))
FROM per
