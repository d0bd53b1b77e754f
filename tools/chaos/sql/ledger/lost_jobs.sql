-- Committed jobs without a terminal end. No parameters; rows of (job_id, marker, kind, pending:
-- deferred, waiting for parents or a ready row without outcome, attempts so far).
SELECT l.job_id, l.marker, l.kind,
       EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = l.job_id)
       OR EXISTS (SELECT 1 FROM awa.waiting_jobs w WHERE w.job_id = l.job_id)
       OR EXISTS (SELECT 1 FROM chaos.ready r WHERE r.job_id = l.job_id
                  AND NOT EXISTS (SELECT 1 FROM chaos.outcomes o
                                  WHERE o.job_id = r.job_id AND o.run_lease = r.run_lease + 1)),
       (SELECT string_agg(format('%s@%s', o.state, o.run_lease), ',' ORDER BY o.run_lease)
        FROM chaos.outcomes o WHERE o.job_id = l.job_id)
FROM chaos.ledger l
WHERE l.committed AND NOT EXISTS (
    SELECT 1 FROM chaos.outcomes o
    WHERE o.job_id = l.job_id AND o.state IN ('completed', 'failed', 'cancelled', 'dlq'))
ORDER BY l.job_id
