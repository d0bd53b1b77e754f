-- The ledger check's own tables: a fresh schema chaos with an empty chaos.ledger (the
-- producers' record: each job, and the batch it joined) and chaos.batches (the batches
-- the producers sealed). A script (several statements), no parameters.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS chaos;
DROP TABLE IF EXISTS chaos.ledger, chaos.batches, chaos.found, chaos.outcomes, chaos.ready;
CREATE TABLE chaos.ledger (
    marker    text PRIMARY KEY,
    job_id    bigint NOT NULL,
    producer  int NOT NULL,
    seq       bigint NOT NULL,
    kind      text NOT NULL,
    okey      text,
    unknown   boolean NOT NULL,
    committed boolean NOT NULL,
    batch     text);
CREATE INDEX ON chaos.ledger (batch) WHERE batch IS NOT NULL;
CREATE TABLE chaos.batches (
    name      text PRIMARY KEY,
    producer  int NOT NULL)
