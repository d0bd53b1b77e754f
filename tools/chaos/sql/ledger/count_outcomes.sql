-- Rows of the snapshot chaos.outcomes (the view comparison runs on small ones only).
-- No parameters.
SELECT count(*) FROM chaos.outcomes
