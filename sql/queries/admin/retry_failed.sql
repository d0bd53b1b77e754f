SELECT unnest({schema}.retry_failed_jobs($1::text, $2::text))
