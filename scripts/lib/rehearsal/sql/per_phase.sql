-- The verdict per phase (the phase a job was produced in), from the last snapshot
-- (snapshot.sql) and the ledger: produced, acknowledged, producer errors, unknown answers,
-- committed jobs, unknown answers that committed, completed, failed, cancelled, lost (not
-- found, or no terminal end), double finalised, unexpected ends. One row per phase, in
-- that column order.
-- Parameters: {lschema} the ledger schema; {terminal} the terminal states as a SQL list.
WITH ends AS (
    SELECT job_id, count(*) FILTER (WHERE state IN {terminal}) AS terminal,
           bool_or(state = 'completed') AS completed, bool_or(state IN ('failed', 'dlq')) AS failed,
           bool_or(state = 'cancelled') AS cancelled
    FROM {lschema}.outcomes GROUP BY job_id),
-- double finalised (tools/chaos/sql/ledger/double_finalised.sql): an attempt closed more
-- than once, or more than one terminal end
dbl AS (
    SELECT job_id FROM {lschema}.outcomes GROUP BY job_id, run_lease HAVING count(*) > 1
    UNION
    SELECT job_id FROM {lschema}.outcomes WHERE state IN {terminal}
    GROUP BY job_id HAVING count(*) > 1),
produced AS (
    SELECT phase, count(*) AS produced, count(*) FILTER (WHERE outcome = 'acked') AS acked,
           count(*) FILTER (WHERE outcome = 'error') AS errors,
           count(*) FILTER (WHERE outcome = 'unknown') AS unknown
    FROM {lschema}.ledger GROUP BY phase),
judged AS (
    SELECT j.phase, count(*) AS jobs,
           count(*) FILTER (WHERE j.outcome <> 'acked') AS unknown_committed,
           count(*) FILTER (WHERE e.completed) AS completed,
           count(*) FILTER (WHERE e.failed) AS failed,
           count(*) FILTER (WHERE e.cancelled) AS cancelled,
           count(*) FILTER (WHERE NOT j.found OR COALESCE(e.terminal, 0) = 0) AS lost,
           count(*) FILTER (WHERE j.job_id IN (SELECT job_id FROM dbl)) AS double_finalised,
           -- ended, but not as its kind should (tools/chaos/sql/ledger/retried_and_unexpected.sql):
           -- 'fail' jobs fail, every other kind here completes
           count(*) FILTER (WHERE e.terminal > 0 AND ((j.kind = 'fail' AND NOT e.failed)
                                                      OR (j.kind <> 'fail' AND NOT e.completed)))
               AS unexpected_ends
    FROM {lschema}.jobs j LEFT JOIN ends e USING (job_id) GROUP BY j.phase)
SELECT p.phase, p.produced, p.acked, p.errors, p.unknown, COALESCE(j.jobs, 0),
       COALESCE(j.unknown_committed, 0), COALESCE(j.completed, 0), COALESCE(j.failed, 0),
       COALESCE(j.cancelled, 0), COALESCE(j.lost, 0), COALESCE(j.double_finalised, 0),
       COALESCE(j.unexpected_ends, 0)
FROM produced p LEFT JOIN judged j USING (phase) ORDER BY p.phase
