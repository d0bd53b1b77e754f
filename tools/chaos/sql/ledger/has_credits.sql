-- Whether this run had the exactly-once worker (its credits table exists; awa_hosts runs
-- none): 1 or 0. No parameters.
SELECT (to_regclass('chaos_credit.credits') IS NOT NULL)::int
