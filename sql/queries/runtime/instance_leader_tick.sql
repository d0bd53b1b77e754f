-- The maintenance leader records a finished round: its own row says is_leader with the
-- time of the round, and any other row still flagged as leader (a predecessor that lost
-- its connection or died) is cleared, so at most one row claims leadership at a time.
-- An upsert, so the tick lands even if the control thread's registration has not.
-- $1 instance id (uuid text), $2 hostname, $3 os pid, $4 queues (text[] literal).
WITH others AS (
    UPDATE {schema}.runtime_instances
    SET is_leader = false
    WHERE is_leader AND instance_id <> $1::uuid)
INSERT INTO {schema}.runtime_instances AS i
    (instance_id, hostname, pid, queues, is_leader, leader_tick_at)
VALUES ($1::uuid, $2, $3, $4::text[], true, now())
ON CONFLICT (instance_id) DO UPDATE
SET is_leader = true, leader_tick_at = now(), last_seen_at = now()
