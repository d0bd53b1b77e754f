-- How many acknowledged inserts name a job other than the one their marker was found in.
-- Parameters: {lschema} the ledger schema.
SELECT count(*) FROM {lschema}.ledger l JOIN {lschema}.found f
        USING (marker) WHERE l.outcome = 'acked' AND f.job_id <> l.job_id
