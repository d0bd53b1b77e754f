-- awa roles setup, step 1: the three NOLOGIN roles, created or brought back to NOLOGIN.
-- Roles are cluster-wide; their privileges are per schema (grants.sql). {producer},
-- {worker} and {admin} are role names the caller validated (lower-case letters, digits
-- and underscores), so they need no quoting.
DO $awa_roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['{producer}', '{worker}', '{admin}'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r AND rolcanlogin) THEN
            -- These roles are granted to login roles, never logged in with themselves.
            EXECUTE format('ALTER ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$awa_roles$;
