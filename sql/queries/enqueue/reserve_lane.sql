-- The COPY path's reservation: the lane range, the ready slot, the transaction time and
-- the job ids for the rows that COPY will send.
-- $1 queue, $2 priority, $3 enqueue_shard, $4 row count.
SELECT rr.first_seq, rr.repaired,
       rr.ready_slot AS slot,
       ARRAY(SELECT nextval('{schema}.job_ids') FROM generate_series(1, $4)) AS job_ids,
       now() AS tx_time
FROM {schema}.reserve_lane_range($1, $2, $3, $4) rr
