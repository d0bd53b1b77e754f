-- A fragment of outcomes_closures.sql: one row per lane_seq of a closure c whose
-- lane_seqs is a bigint[] (early rings schemas). No parameters.
CROSS JOIN LATERAL unnest(c.lane_seqs) AS s(lane_seq)
