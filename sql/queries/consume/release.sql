SELECT {schema}.release_attempts($1::bigint[], $2::bigint[], $3::bigint[], $4)
