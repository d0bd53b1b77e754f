-- Exactly-once effects under faults (docs/workflows.md, "Exactly-once effects"): every
-- "credit" job the producers committed must have exactly one credit if it completed, and
-- none otherwise (a job that ended failed never committed its handler's transaction). A
-- credit is the handler's own write, committed with complete_in's closure or not at all.
-- No parameters; one row: (credit jobs judged, violations as text (at most 20), violations).
WITH credit_jobs AS (
    SELECT l.job_id FROM chaos.ledger l
    WHERE l.kind = 'credit' AND (l.committed OR l.unknown)),
credits AS (
    SELECT c.job_id, count(*) AS n FROM chaos_credit.credits c GROUP BY c.job_id),
completed AS (
    SELECT DISTINCT o.job_id FROM chaos.outcomes o WHERE o.state = 'completed'),
judged AS (
    SELECT j.job_id, coalesce(c.n, 0) AS credits, (d.job_id IS NOT NULL) AS is_completed
    FROM credit_jobs j
    LEFT JOIN credits c ON c.job_id = j.job_id
    LEFT JOIN completed d ON d.job_id = j.job_id),
bad AS (
    SELECT * FROM judged
    WHERE credits <> CASE WHEN is_completed THEN 1 ELSE 0 END
    -- a credit of a job no producer committed (an unknown commit that did not happen)
    UNION ALL
    SELECT c.job_id, c.n, false FROM credits c
    WHERE c.job_id NOT IN (SELECT job_id FROM credit_jobs))
SELECT (SELECT count(*) FROM judged),
       (SELECT string_agg(format('job %s: %s credits, %s', b.job_id, b.credits,
                                 CASE WHEN b.is_completed THEN 'completed' ELSE 'not completed' END),
                          '; ')
        FROM (SELECT * FROM bad ORDER BY job_id LIMIT 20) b),
       (SELECT count(*) FROM bad)
