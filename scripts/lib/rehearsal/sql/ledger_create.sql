-- The ledger schema and table: one row per insert the producer attempted, loaded by COPY.
-- The caller appends the rows (marker, phase, kind, keyed, job_id or \N, outcome:
-- acked | error | unknown) and the terminating "\." after this text.
-- Parameters: {lschema} the ledger schema (dropped and made anew).
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS {lschema} CASCADE;
CREATE SCHEMA {lschema};
CREATE TABLE {lschema}.ledger (marker text PRIMARY KEY, phase text NOT NULL, kind text NOT NULL,
    keyed boolean NOT NULL, job_id bigint, outcome text NOT NULL);
COPY {lschema}.ledger FROM STDIN;
