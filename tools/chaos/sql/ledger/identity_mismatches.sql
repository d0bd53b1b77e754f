-- Phantoms: a marker that names two jobs, or a ledger id that differs from the
-- database's. No parameters; rows of (marker, ledger job_id, database job ids).
SELECT f.marker, l.job_id, string_agg(f.job_id::text, ',')
FROM chaos.found f LEFT JOIN chaos.ledger l ON l.marker = f.marker
GROUP BY f.marker, l.job_id
HAVING count(*) > 1 OR l.job_id IS NULL OR bool_or(f.job_id <> l.job_id)
ORDER BY 1
