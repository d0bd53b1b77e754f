-- $1 role names: those that exist already.
SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY ($1::text[])
