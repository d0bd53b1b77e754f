-- $1 claim batch, $2 lane_seq, $3 job id, $4 run lease, $5 ready slot, $6 attempt,
-- $7 callback timeout (interval text or NULL: unchanged), $8 park (waiting_external).
SELECT {schema}.register_callback($1, $2, $3, $4, $5::smallint, $6::smallint, $7::interval, $8)::text
