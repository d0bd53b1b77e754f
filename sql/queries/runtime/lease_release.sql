-- Gives the maintenance lease up (stop()), so a successor need not wait for it to expire.
-- $1 holder (instance id).
UPDATE {schema}.leader_lease SET expires_at = '-infinity' WHERE holder = $1
