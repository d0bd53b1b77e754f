-- Forgets the record of function files this build no longer has (a file renamed or folded
-- into another): $1 is the build's function file names, one per line. Their functions
-- were replaced or dropped by the files that took their place.
DELETE FROM {schema}.schema_functions
WHERE name <> ALL (string_to_array($1, E'\n'))
RETURNING name
