-- Jobs with an attempt (job_id, run_lease) closed more than once, or more than one
-- terminal end. No parameters; rows of (job_id, why).
SELECT job_id, string_agg(DISTINCT why, '; ')
FROM (SELECT job_id, format('attempt run_lease %s closed %s times (%s)', run_lease, count(*),
                            string_agg(state, ',')) AS why
      FROM chaos.outcomes GROUP BY job_id, run_lease HAVING count(*) > 1
      UNION ALL
      SELECT job_id, format('%s terminal ends (%s)', count(*), string_agg(state, ','))
      FROM chaos.outcomes WHERE state IN ('completed', 'failed', 'cancelled', 'dlq')
      GROUP BY job_id HAVING count(*) > 1) x
GROUP BY job_id ORDER BY job_id
