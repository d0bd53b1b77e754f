-- When the running server started, seconds since the Unix epoch (a restart's fault time).
-- No parameters.
SELECT extract(epoch FROM pg_postmaster_start_time())
