-- Overloads an older signature left behind: functions of the schema named as one the
-- function files re-applied in this transaction create ($1, comma-separated), whose
-- pg_proc row this transaction did not write. CREATE OR REPLACE rewrites the row of the
-- signature it names (a new xmin) and never touches another signature's. Only names this
-- transaction did write count, so a name read from a comment can never drop a live
-- function. Run inside the migrator's transaction (top level: no savepoint).
-- Returns the name for messages, e.g. close_attempts(bigint[], text[]), the schema-qualified
-- identity DROP FUNCTION takes, and the plain name.
SELECT p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')' AS signature,
       pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(p.proname) || '('
           || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' AS identity,
       p.proname::text AS name
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.pronamespace = '{schema}'::regnamespace
  AND p.proname = ANY (string_to_array($1::text, ','))
  AND p.xmin <> pg_catalog.pg_current_xact_id()::xid
  AND EXISTS (SELECT 1
              FROM pg_catalog.pg_proc w
              WHERE w.pronamespace = p.pronamespace AND w.proname = p.proname
                AND w.xmin = pg_catalog.pg_current_xact_id()::xid)
ORDER BY 1
