-- $1 callback id, $2 new callback timeout (interval text) or NULL.
SELECT {schema}.heartbeat_callback($1::uuid, $2::interval)
