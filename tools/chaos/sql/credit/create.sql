-- The exactly-once worker's account (credit_worker.cpp): one row per credit a handler's
-- transaction committed. No key on job_id on purpose: a second credit of a job must be
-- recorded, not refused, so the ledger check can count it. A script, no parameters.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS chaos_credit;
DROP TABLE IF EXISTS chaos_credit.credits;
CREATE TABLE chaos_credit.credits (
    job_id     bigint      NOT NULL,
    run_lease  bigint      NOT NULL,
    credited_at timestamptz NOT NULL DEFAULT clock_timestamp());
