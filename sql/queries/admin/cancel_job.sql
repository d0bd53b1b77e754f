SELECT {schema}.cancel_job($1)
