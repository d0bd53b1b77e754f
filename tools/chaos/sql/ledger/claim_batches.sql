-- Every claim batch of a queue. $1: the queue; rows of
-- (priority, enqueue_shard, batch_id, first_seq, last_seq, n_items).
SELECT priority, enqueue_shard, batch_id, first_seq, last_seq, n_items
FROM awa.claim_batches WHERE queue_id = awa.queue_id_of($1)
