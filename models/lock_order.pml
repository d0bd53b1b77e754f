/*
 * lock_order.pml -- lock plans of the queue-storage engine; checks that no
 * combination of transactions can deadlock (docs/correctness.md, I5).
 *
 * Resources (a transaction holds every lock until it commits):
 *   lane[0..2]    enqueue lane locks, pg_advisory_xact_lock on the lane key;
 *                 exclusive, blocking.  Lane ids are already in ascending
 *                 (queue, priority, enqueue_shard) order:
 *                   0 = (q1, 2, shard 0), 1 = (q1, 2, shard 1), 2 = (q2, 2, shard 0)
 *                 so one enqueue may span shards and queues.
 *   head[0..2]    claim-head rows in queue_claim_heads; FOR UPDATE SKIP LOCKED:
 *                 a claimer only ever *tries* them and never waits.
 *   akey[0..1]    per-attempt lock: an exclusive lock a closer waits for and
 *                 holds to commit, the first closer winning.  The code now takes
 *                 the claim batch's advisory lock in ascending key order
 *                 (close_attempts; attempt_lifecycle.pml models it in detail);
 *                 it was the done_entries unique key when this model was
 *                 written, which has the same lock shape.  Attempt a lives in
 *                 ring slot a.
 *   ring          the ring's serialisation between rotate and prune.  The code
 *                 now only tries it (pg_try_advisory_xact_lock on the ring; the
 *                 ring-state row is no longer locked or updated), so it adds no
 *                 wait at all; the model keeps the stricter blocking lock.
 *   part[0..1]    table-level lock of ring slot k's ready/done partitions.
 *                 Readers and writers (AccessShare, RowExclusive) share it;
 *                 TRUNCATE needs AccessExclusive.  Waiting follows
 *                 PostgreSQL's FIFO lock queue *without* the deadlock
 *                 detector's soft-deadlock queue rearrangement: a new shared
 *                 request queues behind a waiting AccessExclusive unless the
 *                 requester already holds the partition.  That is stricter
 *                 than PostgreSQL, so "no deadlock here" is a safe conclusion.
 *
 * Lock plans (one process per transaction):
 *   Producer   (two of them) lanes in ascending order, 1 or 2 lanes, with one
 *              of the two plans the code has:
 *                COPY plan    reserve every lane (lane locks), then read the
 *                             ring state and COPY into the current slot
 *                             (RowExclusive) -- insert_many_copy;
 *                INSERT plan  per lane, one statement: reserve the lane (lane
 *                             lock), read the ring state, insert into the
 *                             current slot (RowExclusive) -- insert_lane.sql,
 *                             insert_jobs_compat, one insert_job_compat call.
 *              The ring state is a plain read each time (no lock), so the two
 *              inserts of an INSERT-plan batch may land in different slots.
 *   Claimer    AccessShare on every ready/done partition (statement start,
 *              fixed partition order) -> try-lock one claim head (SKIP LOCKED:
 *              take the first candidate nobody holds, or claim nothing) ->
 *              commit.  One claimer process: nothing waits on a claim head
 *              (claimers only try-lock them, nobody else locks them), so a
 *              second claimer could only add another shared holder of the
 *              partitions with the same plan -- it cannot create a wait edge
 *              the first one cannot, and it multiplies the state space.
 *   Completer  completion batch closing attempts 0 and 1 in ascending done-key
 *              order; per attempt: RowExclusive on the attempt's done partition
 *              -> attempt key -> nothing else; commit.  (A batch of one is
 *              the Canceller's plan, or a prefix of this one.)
 *   Canceller  one attempt (either): RowExclusive on its done partition ->
 *              attempt key -> commit.  Rescue closes an attempt with the same
 *              plan, so it is not a separate process.
 *   Maint      rotate: ring -> update -> commit;
 *              prune:  ring -> AccessExclusive on the sealed slot with NOWAIT
 *              (or a short lock_timeout): if it is not free right now, roll
 *              back and retry on a later tick -> re-check (plain MVCC reads of
 *              claim cursors / done rows; takes no row locks) -> TRUNCATE ->
 *              commit.
 *
 * Not modelled (reasoned in docs/correctness.md): the claim ring and lease ring
 * (same plan shape as the queue ring: rotate/prune take their own ring-state
 * row then AccessExclusive; claimers/closers take RowExclusive and never wait
 * on a ring-state row), ensure_lane's creation lock (its own advisory key
 * space, taken per lane inside the same ascending sweep, before that lane's
 * lock), heartbeats (touch only the attempt's own lease row).
 *
 * Check: compile pan with -DSAFETY; a deadlock is an invalid end state (some
 * process blocked outside an end label when nothing can move).
 *
 * Variants
 *   -DBROKEN       enqueue takes lanes in request order, not sorted: producer 1
 *                  locks lane 0 then lane 1, producer 2 locks lane 1 then lane 0.
 *   -DPRUNE_WAITS  prune *queues* for AccessExclusive instead of NOWAIT.  With
 *                  the INSERT plan this closes a cycle: producer A holds lane x
 *                  and RowExclusive on slot k and waits for lane y; producer B
 *                  holds lane y and its RowExclusive request on k queues behind
 *                  prune; prune waits for A.  (PostgreSQL's detector would
 *                  break this one after deadlock_timeout by reordering the
 *                  queue; a queued AccessExclusive also stalls every claimer
 *                  behind it.  Both are why prune must not wait.)
 */

#define NLANES 3
#define NSLOTS 2
#define NATT   2

byte lane_owner[NLANES];
byte head_owner[NLANES];
byte akey_owner[NATT];
byte ring_owner = 0;
byte part_s[NSLOTS];            /* shared holders (AccessShare / RowExclusive) */
bool part_x[NSLOTS];            /* AccessExclusive held                        */
byte part_xwait[NSLOTS];        /* AccessExclusive requests queued             */

byte cur = 0;                   /* current queue-ring slot                     */
bool closed[NATT];              /* attempt has its terminal done row           */

/* Every transaction process has a local `byte hs` (bitmask of the ring slots
 * it holds a shared table lock on); the inlines below use it by name. */
#define HOLDS(k) ((hs >> (k)) & 1)

inline lock_lane(i) { atomic { lane_owner[i] == 0 -> lane_owner[i] = _pid } }

/* shared table lock on slot k.  FIFO queue: wait behind a queued
 * AccessExclusive request unless we already hold the partition. */
inline acquire_s(k)
{
    atomic {
        HOLDS(k) || (!part_x[k] && part_xwait[k] == 0) ->
        if
        :: !HOLDS(k) -> part_s[k]++; hs = hs | (1 << (k))
        :: else -> skip
        fi
    }
}

/* COMMIT: release everything this process holds */
inline release_all(q)
{
    d_step {
        q = 0;
        do
        :: q < NLANES ->
            if :: lane_owner[q] == _pid -> lane_owner[q] = 0 :: else -> skip fi;
            if :: head_owner[q] == _pid -> head_owner[q] = 0 :: else -> skip fi;
            q++
        :: else -> break
        od;
        q = 0;
        do
        :: q < NATT ->
            if :: akey_owner[q] == _pid -> akey_owner[q] = 0 :: else -> skip fi;
            q++
        :: else -> break
        od;
        q = 0;
        do
        :: q < NSLOTS ->
            if :: HOLDS(q) -> part_s[q]-- :: else -> skip fi;
            q++
        :: else -> break
        od;
        q = 0;
        hs = 0
    }
}

/* close attempt a (complete or cancel): first closer wins.  The unique-key
 * wait and the ON CONFLICT decision are one step: once the key is ours, no
 * other closer of this attempt can interleave until we commit. */
inline close_attempt(a)
{
    acquire_s(a);                     /* RowExclusive on done partition of slot a */
    atomic {
        akey_owner[a] == 0 -> akey_owner[a] = _pid;   /* the per-attempt lock  */
        if
        :: !closed[a] -> closed[a] = true             /* INSERT: we are first  */
        :: else -> skip                               /* ON CONFLICT DO NOTHING */
        fi
    }
}

/* Producer plans, as (first lane, second lane, plan); second == NLANES means a
 * one-lane batch (both plans coincide).  Sorted: first < second.  Covers a lane
 * pair within one queue across shards (0,1) and pairs across queues (0,2),
 * (1,2).  One-lane batches {0} and {1} are left out because their lock plan is
 * a prefix of the plan of {0,1} / {1,2}: a transaction that stops earlier holds
 * a subset of the locks for a shorter time and waits on a subset of the
 * requests, so it cannot close a wait cycle the longer plan cannot.  {2} is not
 * a prefix of any sorted pair, so it stays. */
#define COPY_PLAN   0
#define INSERT_PLAN 1
#define PLAN(c, f, s2, how) \
    if \
    :: c == 0 -> f = 2; s2 = NLANES; how = COPY_PLAN \
    :: c == 1 -> f = 0; s2 = 1; how = COPY_PLAN \
    :: c == 2 -> f = 0; s2 = 2; how = COPY_PLAN \
    :: c == 3 -> f = 1; s2 = 2; how = COPY_PLAN \
    :: c == 4 -> f = 0; s2 = 1; how = INSERT_PLAN \
    :: c == 5 -> f = 0; s2 = 2; how = INSERT_PLAN \
    :: c == 6 -> f = 1; s2 = 2; how = INSERT_PLAN \
    fi
#define NPLANS 7

proctype Producer(byte who; byte choice)
{
    byte first, second, how, slot, q, hs;
#ifdef BROKEN
    /* unsorted: lanes locked in request order, which differs per producer */
    if
    :: who == 1 -> first = 0; second = 1
    :: else     -> first = 1; second = 0
    fi;
    how = COPY_PLAN;
#else
    PLAN(choice, first, second, how);  /* ascending (queue, priority, shard) order */
#endif
    lock_lane(first);
    if
    :: how == INSERT_PLAN ->           /* first lane's INSERT statement */
        slot = cur;                    /* plain read of the ring state */
        acquire_s(slot)
    :: else -> skip
    fi;
    if
    :: second < NLANES ->
        printf("MSC: producer %d holds lane %d, requests lane %d\n", who, first, second);
        lock_lane(second)
    :: else -> skip
    fi;
    slot = cur;                        /* plain read of the ring state */
    acquire_s(slot);                   /* COPY / last lane's INSERT */
    first = 0; second = 0; slot = 0; how = 0;
    release_all(q)                     /* COMMIT */
}

proctype Claimer()
{
    byte q, hs;
    acquire_s(0);                      /* AccessShare on every ready/done partition */
    acquire_s(1);
    atomic {                           /* FOR UPDATE OF claims SKIP LOCKED: take the
                                          first candidate head nobody holds, or none */
        if
        :: head_owner[0] == 0 -> head_owner[0] = _pid
        :: else ->
            if
            :: head_owner[1] == 0 -> head_owner[1] = _pid
            :: else ->
                if
                :: head_owner[2] == 0 -> head_owner[2] = _pid
                :: else -> skip        /* every candidate locked: claim nothing */
                fi
            fi
        fi
    };
    release_all(q)                     /* COMMIT (cursor advanced on the locked head) */
}

proctype Completer()
{
    byte q, hs;
    close_attempt(0);                  /* batch of two, ascending done-key order */
    close_attempt(1);
    release_all(q)
}

proctype Canceller()
{
    byte q, first, hs;
    if :: first = 0 :: first = 1 fi;
    close_attempt(first);
    first = 0;
    release_all(q)
}

proctype Maint()
{
    byte victim;
    /* rotate: ring-state row lock, move to the next slot, commit.  It takes no
       other lock, so the whole transaction is one step here. */
    atomic { ring_owner == 0 -> cur = (cur + 1) % NSLOTS };
    /* prune the oldest sealed slot: ring-state lock first */
    atomic { ring_owner == 0 -> ring_owner = _pid; victim = (cur + 1) % NSLOTS };
#ifdef PRUNE_WAITS
    /* LOCK ... IN ACCESS EXCLUSIVE MODE: queue and wait */
    atomic {
        part_xwait[victim]++;
        printf("MSC: prune queues for ACCESS EXCLUSIVE on slot %d\n", victim)
    };
    atomic { !part_x[victim] && part_s[victim] == 0 -> part_xwait[victim]--; part_x[victim] = true };
#else
    /* LOCK ... IN ACCESS EXCLUSIVE MODE NOWAIT: take it now or give up */
    atomic {
        if
        :: !part_x[victim] && part_s[victim] == 0 -> part_x[victim] = true
        :: else -> skip                /* lock_not_available: ROLLBACK, retry next tick */
        fi
    };
#endif
    /* re-check (plain MVCC reads: no locks) + TRUNCATE + COMMIT */
    atomic { part_x[victim] = false; ring_owner = 0; victim = 0 }
}

init
{
    byte c1, c2;
    /* Pick both producers' plans up front.  The producers are identical, so
     * (c1, c2) and (c2, c1) are the same scenario: only c1 <= c2. */
    select (c1 : 0 .. NPLANS - 1);
    select (c2 : 0 .. NPLANS - 1);
    if
    :: c1 <= c2 ->
        atomic {
            run Producer(1, c1); run Producer(2, c2);
            run Claimer();
            run Completer(); run Canceller();
            run Maint();
            c1 = 0; c2 = 0
        }
    :: else -> skip                    /* mirror image of a scenario already covered */
    fi
}
