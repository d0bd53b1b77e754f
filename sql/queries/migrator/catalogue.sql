-- The function catalogue the schema's functions belong to (migration 0014); no row: 0.
SELECT catalogue, oldest_compatible FROM {schema}.schema_catalogue
