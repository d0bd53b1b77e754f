SELECT {schema}.age_waiting_priorities($1::text, $2::interval)
