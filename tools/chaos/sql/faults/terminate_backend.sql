-- Terminates one server session. $1: its pid.
SELECT pg_terminate_backend($1::int)
