-- Rescue decides which attempts are stale before it limits its work
-- (rescue_stale_attempts in sql/functions/0070_attempts.sql). It used to take the 1,000
-- oldest open claim batches and judge them afterwards, so 1,000 healthy long-lived
-- attempts (parked callbacks, long jobs that heartbeat) hid a crashed worker's newer
-- attempts for good. Now each source yields only batches that hold a stale attempt, and
-- the limit applies to what they found.

-- An attempt's lease by its key (claim batch, lane_seq): rescue's count of a batch's
-- leases and its judgement of an attempt, and every heartbeat, callback and close that
-- looks a lease up (each read every lease row for it before). Neither column ever
-- changes, so heartbeats stay HOT updates.
CREATE INDEX leases_claim_batch ON {schema}.leases (claim_batch, lane_seq);

-- Heartbeat rescue of leases: the running ones only (a parked attempt is never
-- heartbeat-stale), however many parked callbacks there are. Keyed like the index above
-- and not on heartbeat_at, which every heartbeat writes: an index on it would make each
-- heartbeat a non-HOT update. The rescue reads heartbeat_at from the row.
CREATE INDEX leases_running ON {schema}.leases (claim_batch, lane_seq) WHERE state = 'running';

-- Callback-timeout rescue: the parked leases past their timeout. Only parking and
-- callback heartbeats write these columns.
CREATE INDEX leases_callback_timeout_at ON {schema}.leases (callback_timeout_at)
    WHERE state = 'waiting_external';

-- Set by rescue, once, on a claim batch claimed before the stale cutoff all of whose open
-- attempts have a lease. That stays true for the rest of the batch's life: claims never
-- add attempts to a batch, and a lease goes only with its attempt (the closer deletes
-- it with the closure; the lease ring's prune carries it). So no attempt of the batch
-- can be a receipt-only stale one any more, and the receipt scan skips it from then on:
-- its attempts are watched through their leases (running, deadline, callback timeout).
-- The only UPDATE of a claim batch row, once per batch that outlives the cutoff; a batch
-- carried by prune comes back unset (the carry copies the columns it names) and is set
-- again by the next rescue.
ALTER TABLE {schema}.claim_batches ADD COLUMN all_leased boolean NOT NULL DEFAULT false;
