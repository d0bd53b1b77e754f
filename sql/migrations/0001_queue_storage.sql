-- Queue-storage engine with sharded enqueue heads (ADR-025; docs/design/storage.md).
--
-- Every hot-path key carries enqueue_shard. The active plane (ready, done, leases,
-- receipts) is partitioned into rings of slots that are reclaimed by TRUNCATE rather than
-- row DELETE, so the hot path only ever INSERTs into the big tables.

-- Per-queue settings. No row means: 1 shard, not paused, no DLQ. Operators upsert it
-- (INSERT ... ON CONFLICT (queue) DO UPDATE), as ADR-025's procedure does.
CREATE TABLE {schema}.queue_meta (
    queue             text PRIMARY KEY,
    enqueue_shards    smallint NOT NULL DEFAULT 1
                      CONSTRAINT queue_meta_enqueue_shards_check CHECK (enqueue_shards BETWEEN 1 AND 64),
    paused            boolean NOT NULL DEFAULT false,
    dlq_enabled       boolean NOT NULL DEFAULT false,
    -- Claim-time priority aging for this queue; NULL: the worker's setting applies.
    priority_aging_ms bigint CHECK (priority_aging_ms > 0),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Lane identity. A lane is (queue, priority, enqueue_shard); lane_id names its
-- advisory lock and its lane_seq sequence, so no user text is ever spliced into an
-- identifier.
CREATE SEQUENCE {schema}.lane_ids AS integer;

-- The enqueue head: one row per lane, written once when the lane is created. The
-- enqueue cursor itself lives in the lane's sequence (seq), which producers advance under
-- the lane's transaction-scoped advisory lock; the row is never updated on the hot path.
CREATE TABLE {schema}.queue_enqueue_heads (
    queue         text     NOT NULL,
    priority      smallint NOT NULL CHECK (priority BETWEEN 1 AND 4),
    enqueue_shard smallint NOT NULL CHECK (enqueue_shard BETWEEN 0 AND 63),
    lane_id       integer  NOT NULL UNIQUE,
    seq           regclass NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, enqueue_shard)
);

-- The claim head: the row a claimer locks (FOR UPDATE OF claims SKIP LOCKED).
-- claim_seq is the lane's claim cursor: every lane_seq below it is claimed, cancelled or
-- a rollback gap. It is advanced in the claim transaction itself, so a rolled-back claim
-- rolls the cursor back with it and a crash after commit has nothing left to repair.
-- Low fillfactor keeps those updates HOT.
CREATE TABLE {schema}.queue_claim_heads (
    queue         text     NOT NULL,
    priority      smallint NOT NULL CHECK (priority BETWEEN 1 AND 4),
    enqueue_shard smallint NOT NULL CHECK (enqueue_shard BETWEEN 0 AND 63),
    claim_seq     bigint   NOT NULL DEFAULT 1,
    claimed_at    timestamptz,
    PRIMARY KEY (queue, priority, enqueue_shard)
) WITH (fillfactor = 30);

-- Ring state: which slot of each ring receives new rows. Changed only on rotation.
CREATE TABLE {schema}.ring_state (
    ring         text     PRIMARY KEY CHECK (ring IN ('queue', 'lease', 'claim')),
    current_slot smallint NOT NULL,
    slot_count   smallint NOT NULL CHECK (slot_count BETWEEN 2 AND 64),
    oldest_slot  smallint NOT NULL DEFAULT 0,
    generation   bigint   NOT NULL DEFAULT 0,
    CHECK (current_slot >= 0 AND current_slot < slot_count AND oldest_slot >= 0 AND oldest_slot < slot_count)
);
INSERT INTO {schema}.ring_state (ring, current_slot, slot_count)
VALUES ('queue', 0, 16), ('lease', 0, 8), ('claim', 0, 8);

-- Job ids: unique, not ordered across sessions (each session caches a block of ids, which
-- keeps nextval off the shared sequence page on the enqueue hot path).
CREATE SEQUENCE {schema}.job_ids AS bigint CACHE 512;

-- The SQL producer's rotor (insert_job_compat), the counterpart of the C++ per-store rotor.
CREATE SEQUENCE {schema}.compat_rotor AS bigint CYCLE MAXVALUE 1000000000;

-- Runnable jobs. Immutable rows: a claim never updates them; the claim cursor, the
-- receipt and the done row say what happened to each.
CREATE TABLE {schema}.ready_entries (
    ready_slot    smallint    NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    lane_seq      bigint      NOT NULL,
    job_id        bigint      NOT NULL,
    kind          text        NOT NULL,
    args          jsonb       NOT NULL,
    attempt       smallint    NOT NULL DEFAULT 0,
    run_lease     bigint      NOT NULL DEFAULT 0,
    max_attempts  smallint    NOT NULL,
    run_at        timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    ordering_key  bytea,
    metadata      jsonb,
    tags          text[],
    errors        jsonb,
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq)
) PARTITION BY LIST (ready_slot);

-- The end of each ready row's attempt, on the ready row's own key. Narrow: the body is
-- hydrated from the retained ready row. Its primary key is the per-attempt lock: every
-- path that closes an attempt (complete, fail, retry, snooze, cancel, rescue) inserts
-- here with ON CONFLICT DO NOTHING, and the first one wins. state is the attempt's end:
-- completed / failed / cancelled are the job's terminal states; retried / snoozed /
-- rescued mean the job went on as a new row (deferred or ready again); dlq means it was
-- moved to dlq_entries. Jobs that never had a ready row (a cancelled scheduled job) use
-- lane_seq = -job_id, which no lane sequence produces.
CREATE TABLE {schema}.done_entries (
    ready_slot    smallint    NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    lane_seq      bigint      NOT NULL,
    job_id        bigint      NOT NULL,
    run_lease     bigint      NOT NULL,
    attempt       smallint    NOT NULL,
    state         text        NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled', 'retried', 'snoozed', 'rescued', 'dlq')),
    finished_at   timestamptz NOT NULL DEFAULT now(),
    error         text,
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq)
) PARTITION BY LIST (ready_slot);

-- Cancelled-before-claim markers: the claim skips these rows (and moves its cursor past
-- them). Append-only, pruned with the ring.
CREATE TABLE {schema}.ready_tombstones (
    ready_slot    smallint NOT NULL,
    queue         text     NOT NULL,
    priority      smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    lane_seq      bigint   NOT NULL,
    job_id        bigint   NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq)
);

-- Receipts: the claim's evidence for short attempts, one row per claimed attempt.
CREATE TABLE {schema}.lease_claims (
    claim_slot    smallint    NOT NULL,
    job_id        bigint      NOT NULL,
    run_lease     bigint      NOT NULL,
    ready_slot    smallint    NOT NULL,
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    lane_seq      bigint      NOT NULL,
    attempt       smallint    NOT NULL,
    claimed_at    timestamptz NOT NULL,
    deadline_at   timestamptz,
    PRIMARY KEY (claim_slot, job_id, run_lease)
) PARTITION BY LIST (claim_slot);

-- Durable execution rows for attempts that heartbeat, report progress or wait for a
-- callback (materialised from the receipt). Updated by heartbeats, hence the fillfactor.
CREATE TABLE {schema}.leases (
    lease_slot          smallint    NOT NULL,
    queue               text        NOT NULL,
    priority            smallint    NOT NULL,
    enqueue_shard       smallint    NOT NULL,
    lane_seq            bigint      NOT NULL,
    job_id              bigint      NOT NULL,
    run_lease           bigint      NOT NULL,
    ready_slot          smallint    NOT NULL,
    claim_slot          smallint    NOT NULL,
    attempt             smallint    NOT NULL,
    state               text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'waiting_external')),
    heartbeat_at        timestamptz NOT NULL DEFAULT now(),
    deadline_at         timestamptz,
    callback_timeout_at timestamptz,
    progress            jsonb,
    PRIMARY KEY (lease_slot, queue, priority, enqueue_shard, lane_seq)
) PARTITION BY LIST (lease_slot);

-- Scheduled jobs, retry backoff and snoozes. No lane, no shard: promotion routes them
-- through the enqueue routine with the queue's current shard count.
CREATE TABLE {schema}.deferred_jobs (
    job_id       bigint      PRIMARY KEY,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL,
    kind         text        NOT NULL,
    args         jsonb       NOT NULL,
    attempt      smallint    NOT NULL DEFAULT 0,
    run_lease    bigint      NOT NULL DEFAULT 0,
    max_attempts smallint    NOT NULL,
    run_at       timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    ordering_key bytea,
    metadata     jsonb,
    tags         text[],
    errors       jsonb,
    reason       text        NOT NULL DEFAULT 'scheduled' CHECK (reason IN ('scheduled', 'retry', 'snooze', 'rescue'))
);
CREATE INDEX deferred_jobs_run_at ON {schema}.deferred_jobs (run_at);

-- Dead letters: unsharded, keyed by the globally unique job_id. A full snapshot.
CREATE TABLE {schema}.dlq_entries (
    job_id       bigint      PRIMARY KEY,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL,
    kind         text        NOT NULL,
    args         jsonb       NOT NULL,
    attempt      smallint    NOT NULL,
    run_lease    bigint      NOT NULL,
    max_attempts smallint    NOT NULL,
    created_at   timestamptz NOT NULL,
    ordering_key bytea,
    metadata     jsonb,
    tags         text[],
    errors       jsonb,
    reason       text        NOT NULL,
    dlq_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dlq_entries_queue ON {schema}.dlq_entries (queue, dlq_at);

-- The ring partitions.
DO $$
DECLARE
    slot int;
BEGIN
    FOR slot IN 0..15 LOOP
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.ready_entries FOR VALUES IN (%s)',
                       '{schema}', 'ready_entries_' || slot, '{schema}', slot);
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.done_entries FOR VALUES IN (%s)',
                       '{schema}', 'done_entries_' || slot, '{schema}', slot);
    END LOOP;
    FOR slot IN 0..7 LOOP
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.lease_claims FOR VALUES IN (%s)',
                       '{schema}', 'lease_claims_' || slot, '{schema}', slot);
        EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.leases FOR VALUES IN (%s) WITH (fillfactor = 70)',
                       '{schema}', 'leases_' || slot, '{schema}', slot);
    END LOOP;
END
$$;
