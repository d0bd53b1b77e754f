-- Ledger totals: unknown commits, unknown commits found applied, committed jobs.
-- No parameters.
SELECT count(*) FILTER (WHERE unknown), count(*) FILTER (WHERE unknown AND committed),
       count(*) FILTER (WHERE committed)
FROM chaos.ledger
