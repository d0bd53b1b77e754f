-- A fragment of outcomes_closures.sql: one row per lane_seq of a closure c whose
-- lane_seqs is an array of ranges (later rings schemas). No parameters.
CROSS JOIN LATERAL unnest(c.lane_seqs) AS rg(closed)
    CROSS JOIN LATERAL generate_series(lower(rg.closed), upper(rg.closed) - 1) AS s(lane_seq)
