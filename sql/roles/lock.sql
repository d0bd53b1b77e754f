-- Serialises concurrent `awa roles setup` runs (roles are cluster-wide, so two creators of
-- one role would otherwise collide on pg_authid's unique name). Ends with the transaction.
SELECT pg_advisory_xact_lock(hashtext('awa-roles-setup'), 0)
