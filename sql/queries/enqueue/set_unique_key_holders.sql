-- The written jobs of keys that claim_unique_keys claimed for a placeholder in this
-- transaction. $1 keys, $2 job ids. Returns how many keys were named.
SELECT {schema}.set_unique_key_holders($1::bytea[], $2::bigint[])
