-- Whether the schema ($1, unquoted) has the migrator's version tables: (schema_migrations,
-- schema_catalogue). Read by a client with migrate off before it starts.
SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL,
       to_regclass(format('%I.schema_catalogue', $1::text)) IS NOT NULL
