-- One wake-up per queue (channel notify_channel(queue): "awa:<queue>" or its hash).
SELECT pg_notify({schema}.notify_channel(q), '') FROM unnest($1::text[]) AS q
