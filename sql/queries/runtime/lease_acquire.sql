-- Maintenance leader election by lease (sql/migrations/0010_leader_lease.sql), for a
-- client without a session of its own (through a transaction pooler): takes the lease if
-- it has expired, or renews it if $1 holds it, in one statement. A row back means $1
-- leads until the returned expires_at; no row means another holder's lease is running.
-- Two callers serialise on the row; ON CONFLICT DO UPDATE evaluates its WHERE on the
-- latest row version, so only one of them can take an expired lease. Upsert: a missing
-- row is re-created.
-- $1 holder (instance id), $2 lease length in milliseconds.
INSERT INTO {schema}.leader_lease AS l (id, holder, expires_at, acquired_at)
VALUES (true, $1, now() + $2::bigint * interval '1 millisecond', now())
ON CONFLICT (id) DO UPDATE
SET holder = EXCLUDED.holder,
    expires_at = EXCLUDED.expires_at,
    acquired_at = CASE WHEN l.holder IS DISTINCT FROM EXCLUDED.holder OR l.expires_at < now()
                       THEN now() ELSE l.acquired_at END
WHERE l.expires_at < now() OR l.holder = EXCLUDED.holder
RETURNING expires_at
