-- How many committed jobs (acknowledged) have no marker in the schema at all.
-- Parameters: {lschema} the ledger schema.
SELECT count(*) FROM {lschema}.jobs WHERE NOT found
