-- Admin::health, step 1: which of the schema's tables exist, so that health can report an
-- unmigrated or partly migrated schema instead of failing on a missing relation.
-- $1: the schema name, unquoted.
SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL,
       to_regclass(format('%I.runtime_instances', $1::text)) IS NOT NULL,
       to_regclass(format('%I.queue_claim_heads', $1::text)) IS NOT NULL
