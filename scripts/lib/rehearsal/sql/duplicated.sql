-- How many markers were found under more than one job (a job enqueued twice), from the
-- last snapshot (snapshot.sql).
-- Parameters: {lschema} the ledger schema.
SELECT count(*) FROM (SELECT marker FROM {lschema}.found
        GROUP BY marker HAVING count(DISTINCT job_id) > 1) x
