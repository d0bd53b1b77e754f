SELECT {schema}.purge_dlq_entries($1::bigint, $2::text, $3::text, $4::interval, $5::boolean)
