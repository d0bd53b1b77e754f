-- The migrations applied to the schema.
SELECT version FROM {schema}.schema_migrations
