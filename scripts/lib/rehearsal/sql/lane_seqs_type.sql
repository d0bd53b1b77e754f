-- The type of claim_closures.lane_seqs in the rehearsal schema: NULL before the rings (no
-- claim_closures), 'bigint[]' in early rings schemas, a range array in later ones.
-- Parameters: {schema} the rehearsal schema.
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid = to_regclass('{schema}.claim_closures') AND attname = 'lane_seqs'
