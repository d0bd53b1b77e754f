-- awa cron remove: $1 name. Jobs it enqueued stay. A row: it existed.
DELETE FROM {schema}.periodic_jobs WHERE name = $1 RETURNING name
