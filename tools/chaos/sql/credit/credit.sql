-- One credit, written by a "credit" handler in its own transaction before it completes the
-- job there (JobContext::complete_in). $1 job id, $2 the attempt's run_lease.
INSERT INTO chaos_credit.credits (job_id, run_lease) VALUES ($1, $2)
