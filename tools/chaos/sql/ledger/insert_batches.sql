-- Loads the batches the producers sealed (a seal that returned success) into
-- chaos.batches. $1, $2: arrays of name, producer.
INSERT INTO chaos.batches (name, producer)
SELECT n, p FROM unnest($1::text[], $2::int[]) AS t(n, p)
