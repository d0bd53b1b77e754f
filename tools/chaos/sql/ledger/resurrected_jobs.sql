-- Jobs runnable again after their terminal end: a deferred row, or a ready row of a later
-- lease. A ready row at lane_seq < 0 is history, never runnable: the kept body of a job
-- that ended without a lane (cancelled while scheduled, or while waiting for its parents).
-- No parameters; rows of (job_id, run_lease of the terminal end).
SELECT t.job_id, t.run_lease
FROM (SELECT job_id, min(run_lease) AS run_lease FROM chaos.outcomes
      WHERE state IN ('completed', 'failed', 'cancelled', 'dlq') GROUP BY job_id) t
WHERE EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = t.job_id)
   OR EXISTS (SELECT 1 FROM chaos.ready r WHERE r.job_id = t.job_id
              AND r.lane_seq > 0 AND r.run_lease >= t.run_lease)
ORDER BY 1
