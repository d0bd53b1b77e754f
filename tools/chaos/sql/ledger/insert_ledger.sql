-- Loads the producers' record into chaos.ledger (unknown commits start uncommitted).
-- $1..$7: arrays of marker, job_id, producer, seq, kind, okey, unknown.
INSERT INTO chaos.ledger (marker, job_id, producer, seq, kind, okey, unknown, committed)
SELECT m, j, p, s, k, o, u, NOT u
FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::text[],
            $7::boolean[]) AS t(m, j, p, s, k, o, u)
