-- Rows in which chaos.outcomes and the view awa.attempt_outcomes differ (must be 0; run on
-- small ledgers only: the view is quadratic). No parameters.
SELECT (SELECT count(*) FROM (SELECT job_id, run_lease, state FROM awa.attempt_outcomes
                              EXCEPT ALL
                              SELECT job_id, run_lease, state FROM chaos.outcomes) a)
     + (SELECT count(*) FROM (SELECT job_id, run_lease, state FROM chaos.outcomes
                              EXCEPT ALL
                              SELECT job_id, run_lease, state FROM awa.attempt_outcomes) b)
