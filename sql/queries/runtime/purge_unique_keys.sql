-- One step of the maintenance leader's unique-key purge (purge_unique_keys in
-- sql/functions/0025_unique.sql). $1: the last key of the previous step (NULL: from the
-- start), $2: keys to scan at most.
SELECT purged, last_key FROM {schema}.purge_unique_keys($1::bytea, $2::integer)
