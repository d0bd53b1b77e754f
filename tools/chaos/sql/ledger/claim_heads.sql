-- The claim cursor of every lane of a queue. $1: the queue; rows of
-- (priority, enqueue_shard, claim_seq).
SELECT priority, enqueue_shard, claim_seq FROM awa.queue_claim_heads WHERE queue_id = awa.queue_id_of($1)
