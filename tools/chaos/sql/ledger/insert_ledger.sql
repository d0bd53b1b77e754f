-- Loads the producers' record into chaos.ledger (unknown commits start uncommitted).
-- $1..$8: arrays of marker, job_id, producer, seq, kind, okey, unknown, batch.
INSERT INTO chaos.ledger (marker, job_id, producer, seq, kind, okey, unknown, committed, batch)
SELECT m, j, p, s, k, o, u, NOT u, b
FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::text[],
            $7::boolean[], $8::text[]) AS t(m, j, p, s, k, o, u, b)
