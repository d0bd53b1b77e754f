-- What each role holds in this schema, for the setup report: one row per (role, kind of
-- object, privilege set) with the objects, partitions left out (they follow their
-- parents, except the worker's TRUNCATE, reported on "partitions").
-- $1 role names.
WITH r AS (
    SELECT u.role, pg_catalog.to_regrole(u.role) AS oid FROM unnest($1::text[]) AS u(role)),
objects AS (
    SELECT r.role, 'schema' AS kind, n.nspname::text AS obj, a.privilege_type AS priv
    FROM pg_catalog.pg_namespace n
    CROSS JOIN LATERAL aclexplode(n.nspacl) a
    JOIN r ON a.grantee = r.oid
    WHERE n.oid = '{schema}'::regnamespace
    UNION ALL
    SELECT r.role,
           CASE WHEN c.relkind = 'S' THEN 'sequences'
                WHEN c.relispartition THEN 'partitions' ELSE 'tables' END,
           CASE WHEN c.relispartition THEN 'ring partitions' ELSE c.relname::text END,
           a.privilege_type
    FROM pg_catalog.pg_class c
    CROSS JOIN LATERAL aclexplode(c.relacl) a
    JOIN r ON a.grantee = r.oid
    WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
      AND (NOT c.relispartition OR a.privilege_type = 'TRUNCATE')
    UNION ALL
    SELECT r.role, 'columns', c.relname || '(' || at.attname || ')', a.privilege_type
    FROM pg_catalog.pg_attribute at
    JOIN pg_catalog.pg_class c ON c.oid = at.attrelid
    CROSS JOIN LATERAL aclexplode(at.attacl) a
    JOIN r ON a.grantee = r.oid
    WHERE c.relnamespace = '{schema}'::regnamespace AND NOT c.relispartition
    UNION ALL
    SELECT r.role, 'functions', p.proname::text, a.privilege_type
    FROM pg_catalog.pg_proc p
    CROSS JOIN LATERAL aclexplode(p.proacl) a
    JOIN r ON a.grantee = r.oid
    WHERE p.pronamespace = '{schema}'::regnamespace),
per_object AS (
    SELECT role, kind, obj, string_agg(DISTINCT priv, ', ' ORDER BY priv) AS privs
    FROM objects GROUP BY role, kind, obj)
SELECT role, kind, privs, string_agg(DISTINCT obj, ', ' ORDER BY obj) AS objects
FROM per_object
GROUP BY role, kind, privs
ORDER BY array_position($1::text[], role), kind, privs
