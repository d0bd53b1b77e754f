-- How many committed jobs have no terminal end yet (the drain waits for 0), read from the
-- last snapshot (snapshot.sql).
-- Parameters: {lschema} the ledger schema; {terminal} the terminal states as a SQL list.
SELECT count(*) FROM {lschema}.jobs j WHERE NOT EXISTS (
    SELECT 1 FROM {lschema}.outcomes o WHERE o.job_id = j.job_id AND o.state IN {terminal})
