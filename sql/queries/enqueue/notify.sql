-- One wake-up per queue per transaction (channel "awa:<queue>").
SELECT pg_notify('awa:' || q, '') FROM unnest($1::text[]) AS q
