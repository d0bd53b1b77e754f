-- The maintenance leader, every round: $1 schedules at most, $2 catch-up jobs per schedule.
SELECT name, {schema}.iso_utc(occurrence), job_id, error
FROM {schema}.fire_due_periodic($1::integer, $2::integer)
