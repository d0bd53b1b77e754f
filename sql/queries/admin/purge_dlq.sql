SELECT {schema}.purge_dlq($1::interval)
