-- Every ready row of a queue's lanes and whether it is tombstoned (not the kept bodies at
-- lane_seq = -job_id of jobs that ended without a lane, which no lane holds). $1: the
-- queue; rows of (priority, enqueue_shard, lane_seq, tombstoned).
SELECT r.priority, r.enqueue_shard, r.lane_seq,
       EXISTS (SELECT 1 FROM awa.ready_tombstones t
               WHERE t.queue_id = r.queue_id AND t.priority = r.priority
                 AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
FROM awa.ready_entries r WHERE r.queue_id = awa.queue_id_of($1) AND r.lane_seq > 0
