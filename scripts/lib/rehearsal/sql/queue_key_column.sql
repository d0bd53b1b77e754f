-- The column ready_entries keys a queue by in the rehearsal schema: 'queue_id' from
-- migration 0018 on, 'queue' (the name) before it. Parameters: {schema} the rehearsal schema.
SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_attribute
                         WHERE attrelid = to_regclass('{schema}.ready_entries')
                           AND attname = 'queue_id' AND NOT attisdropped)
            THEN 'queue_id' ELSE 'queue' END
