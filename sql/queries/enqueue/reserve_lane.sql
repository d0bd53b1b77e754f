-- The COPY path's reservation: the lane range, the ready slot, the job ids for the rows
-- that COPY will send, the transaction time in Unix microseconds (binary COPY carries
-- timestamps as numbers) and the queue's id. Run as one statement of the COPY script, which sends no
-- parameters: the caller binds quoted literals to $1 queue, $2 priority, $3 enqueue_shard,
-- $4 row count.
SELECT rr.first_seq, rr.repaired,
       rr.ready_slot AS slot,
       ARRAY(SELECT nextval('{schema}.job_ids') FROM generate_series(1, $4::integer)) AS job_ids,
       (extract(epoch FROM now()) * 1000000)::bigint AS tx_micros,
       rr.queue_id
FROM {schema}.reserve_lane_range($1::text, $2::integer, $3::integer, $4::integer) rr
