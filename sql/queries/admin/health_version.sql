-- Admin::health: the newest migration applied to the schema (0: none).
SELECT coalesce(max(version), 0)::integer FROM {schema}.schema_migrations
