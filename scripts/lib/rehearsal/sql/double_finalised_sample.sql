-- Up to 10 committed jobs finalised twice (an attempt closed more than once, or more than
-- one terminal end) with their ends as "state@run_lease,...".
-- Parameters: {lschema} the ledger schema; {terminal} the terminal states as a SQL list.
SELECT job_id, string_agg(format('%s@%s', state, run_lease), ',' ORDER BY run_lease)
FROM {lschema}.outcomes WHERE job_id IN (
    SELECT job_id FROM {lschema}.outcomes GROUP BY job_id, run_lease HAVING count(*) > 1
    UNION SELECT job_id FROM {lschema}.outcomes WHERE state IN {terminal}
    GROUP BY job_id HAVING count(*) > 1)
  AND job_id IN (SELECT job_id FROM {lschema}.jobs)
GROUP BY job_id ORDER BY job_id LIMIT 10
