-- Up to 10 lost jobs (not found, or no terminal end) with their marker, phase, kind, found
-- flag and their ends as "state@run_lease,...".
-- Parameters: {lschema} the ledger schema; {terminal} the terminal states as a SQL list.
SELECT j.job_id, j.marker, j.phase, j.kind, j.found,
       COALESCE((SELECT string_agg(format('%s@%s', o.state, o.run_lease), ',' ORDER BY o.run_lease)
                 FROM {lschema}.outcomes o WHERE o.job_id = j.job_id), '')
FROM {lschema}.jobs j
WHERE NOT j.found OR NOT EXISTS (SELECT 1 FROM {lschema}.outcomes o
                                 WHERE o.job_id = j.job_id AND o.state IN {terminal})
ORDER BY j.job_id LIMIT 10
