-- Registers this runtime instance in runtime_instances, or marks it seen now (the
-- control thread, every few seconds; docs/runtime.md, "Instance registry"). An upsert, so
-- a row removed meanwhile (expired during a long partition) comes back.
-- $1 instance id (uuid text), $2 hostname, $3 os pid, $4 queues (text[] literal).
INSERT INTO {schema}.runtime_instances AS i (instance_id, hostname, pid, queues)
VALUES ($1::uuid, $2, $3, $4::text[])
ON CONFLICT (instance_id) DO UPDATE SET last_seen_at = now()
