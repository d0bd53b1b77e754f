-- Terminal outcomes of committed jobs: completed, failed, cancelled, dlq.
-- No parameters.
SELECT count(*) FILTER (WHERE o.state = 'completed'), count(*) FILTER (WHERE o.state = 'failed'),
       count(*) FILTER (WHERE o.state = 'cancelled'), count(*) FILTER (WHERE o.state = 'dlq')
FROM chaos.outcomes o JOIN chaos.ledger l ON l.job_id = o.job_id AND l.committed
WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')
