/*
 * attempt_lifecycle.pml -- closing attempts of a claim batch exactly once
 * (claim-batch storage: one claim_batches row per claim call, closure
 * evidence in the append-only claim_closures table).
 *
 * Resources
 *   Claim batches.  One claim call writes one batch row: a lane range and its
 *     items, one item per claimed ready row = one attempt, named by
 *     (batch_id, lane_seq).  Here: batch 0 = attempts 0 and 1 (lane_seq 1, 2),
 *     batch 1 = attempt 2.  The claim ring has two slots: batch 0 lives in the
 *     sealed slot 0, batch 1 in the current slot 1.
 *   Closure evidence.  claim_closures rows (batch_id, lane_seqs[], outcome),
 *     stored in the slot of their batch.  An attempt is CLOSED iff some closure
 *     row of its batch contains its lane_seq; crow[] counts those entries per
 *     (slot, attempt).  A non-success closure also writes the attempt's
 *     done_entries row and its follow-up (deferred retry or DLQ row), counted
 *     together in the ghost ndone[].
 *   Batch locks.  One transaction-scoped advisory lock per batch_id: closers
 *     and prune take it exclusive, heartbeats shared.  Released at commit.
 *   Leases.  lease[a]: the attempt's lease row (written by heartbeats, deleted
 *     by the closer that closes the attempt).
 *
 * Plans (one process per transaction; each closer is one plpgsql call in READ
 * COMMITTED):
 *   Closer     1. exclusive lock on every distinct batch of its input, in
 *                 ascending batch_id (blocking);
 *              2. NEW statement, so a fresh snapshot taken after the locks: read
 *                 the batch rows and closure rows of those batches, drop input
 *                 items whose attempt is closed (or whose batch is gone: a fully
 *                 closed batch pruned away), de-duplicate (first occurrence of
 *                 an attempt wins);
 *              3. append closure rows (+ done/follow-up rows for non-success,
 *                 delete the lease rows of the attempts it closed), commit.
 *              Dropped items are reported stale.  Three closers (trails print
 *              them as closer 1, 2, 3):
 *                completer  a completion-batcher flush
 *                           [attempt 2 dlq, attempt 0 completed, attempt 0 retried]
 *                           (the same attempt twice), optionally re-sent once
 *                           after the first send committed (outcome unknown to
 *                           the client);
 *                rescuer    rescue of stale attempts [attempt 0, attempt 2]
 *                           (stale heartbeat / deadline);
 *                canceller  cancel of one running attempt, 0 or 1 (chosen at
 *                           the start; with 0, attempt 1 is never closed and
 *                           batch 0 stays open to the end).
 *              Completer and rescuer name the two batches in opposite input
 *              order, so sorting is what keeps them apart.
 *   Heartbeat  shared lock on the batch -> new statement: if the attempt is
 *              open, insert/update its lease row -> commit.  One heartbeat, of
 *              attempt 0 or 1.
 *   Prune      of the sealed slot 0, once.  Plain read: is every batch in the
 *              slot fully closed (sum of closure cardinalities = n_items)?
 *                yes -> TRUNCATE the slot, commit;
 *                no  -> carry: try-lock the batch's advisory lock (held by
 *                       anybody -> give up, retry on a later tick); new
 *                       statement: copy the batch row and its closure rows into
 *                       the current slot; TRUNCATE the sealed slot; commit.
 *
 * Abstractions
 *   - A snapshot is explicit: a closer copies what it needs (open/closed per
 *     input item, the slot holding each batch) into locals at the moment its
 *     statement starts and decides from that copy only.  Writes are invisible
 *     until commit, and a commit makes them visible and releases the locks in
 *     one step (PostgreSQL makes a transaction visible before it releases its
 *     locks), so "append + commit + unlock" is one atomic step.
 *   - Row-level and table-level locks (the TRUNCATE's AccessExclusive against
 *     the closers' RowExclusive) are left to lock_order.pml; here they only
 *     make each TRUNCATE and each commit atomic.  The advisory-lock queue is
 *     not FIFO here (a shared request is not queued behind a waiting exclusive
 *     one); with one shared holder that never waits while holding it, this
 *     cannot add or remove a wait cycle.
 *   - Outcomes other than "completed" stand for every non-success close
 *     (failed, cancelled, retried, snoozed, rescued, dlq): each writes one done
 *     row plus its follow-up in the same transaction as its closure entry.
 *   - Claim, job ids, run leases, receipts and the queue ring are left out:
 *     the batch rows exist from the start and every attempt is running.
 *
 * Checks (pan -DSAFETY)
 *   - exactly one outcome per attempt: a closure entry is only ever appended for
 *     an attempt that has none (assert(!double_close) at every commit; the
 *     ghost nclose[] survives TRUNCATE); at the end every attempt has exactly
 *     one, and a done row iff its outcome is not "completed";
 *   - a stale report is true: an item a closer drops was really closed before
 *     (by another closer, or earlier in the same call) -- so a closer whose
 *     attempt was already closed writes nothing for it, and no outcome is lost
 *     (assert(!false_stale));
 *   - no orphan lease: no heartbeat commits a lease row for an attempt with
 *     closure evidence (assert(!orphan_lease)), and none survives at the end;
 *   - an open attempt's batch row is never lost: at every TRUNCATE and at the
 *     end it exists in exactly one slot (assert(!lost_open_batch));
 *   - no deadlock: init waits until every other process has ended, so a wait
 *     cycle is an invalid end state.
 *
 * Variants
 *   -DSTALE_SNAPSHOT    the closer reads closure evidence with the snapshot of
 *                       the statement that takes the locks (taken before they
 *                       are granted): a closer that waited for another's
 *                       lock still sees the attempt open, and both close it.
 *   -DNO_DEDUP          the flush is not de-duplicated: the completer appends
 *                       two closure entries for attempt 0 in one call.
 *   -DUNSORTED_LOCKS    batch locks in input order: the completer holds batch 1
 *                       and waits for 0, the rescuer holds 0 and waits for 1.
 *   -DHEARTBEAT_NOLOCK  the heartbeat skips the shared lock: it sees attempt 0
 *                       open, a closer closes it (no lease row to delete yet),
 *                       then the heartbeat commits its lease: an orphan lease.
 *   -DPRUNE_NOLOCK      carry without the batch's try-lock: a closer commits a
 *                       closure entry into the sealed slot after prune's copy
 *                       read it, TRUNCATE drops it, and a later closer closes
 *                       the attempt a second time.
 */

#define NB        2             /* batches                                     */
#define NA        3             /* attempts: 0, 1 in batch 0; 2 in batch 1     */
#define NS        2             /* claim-ring slots: 0 sealed, 1 current       */
#define MAXIN     3             /* items per closer call                       */
#define NCLOSERS  3

#define BATCH(a)  ((a) / 2)
#define NITEMS(b) (2 - (b))     /* batch 0: 2 items, batch 1: 1 item           */
#define BP(b, s)  ((b) * NS + (s))
#define CR(s, a)  ((s) * NA + (a))

/* outcomes */
#define COMPLETED 1             /* success: closure entry only                 */
#define RETRIED   2             /* the rest: closure + done row + follow-up    */
#define CANCELLED 3
#define RESCUED   4
#define DLQ       5

/* closers */
#define COMPLETER 1
#define RESCUER   2
#define CANCELLER 3

/* closer inputs, index (who - 1) * MAXIN + i; set once by init */
byte in_att[NCLOSERS * MAXIN];
byte in_out[NCLOSERS * MAXIN];
byte in_n[NCLOSERS];

byte xlock[NB];                 /* advisory lock: exclusive holder (_pid) or 0 */
byte slock[NB];                 /* advisory lock: number of shared holders     */
bool bpres[NB * NS];            /* batch row b present in slot s               */
byte crow[NS * NA];             /* closure entries of attempt a in slot s      */
bool lease[NA];                 /* lease row of attempt a                      */

/* ghosts */
byte nclose[NA];                /* closures ever committed (survive TRUNCATE)  */
byte first_closer[NA];
byte outcome[NA];
byte ndone[NA];                 /* done rows (+ follow-ups) ever written       */
bool double_close = false;
bool false_stale = false;
bool orphan_lease = false;
bool lost_open_batch = false;

#define CLOSED_EV(a)  (crow[CR(0, a)] + crow[CR(1, a)] > 0)
#define PRESENT(b)    (bpres[BP(b, 0)] || bpres[BP(b, 1)])
#define OPEN_EV(a)    (PRESENT(BATCH(a)) && !CLOSED_EV(a))
#define SLOT_OF(b)    (bpres[BP(b, 0)] -> 0 : (bpres[BP(b, 1)] -> 1 : NS))

/* every batch with an attempt that was never closed is in exactly one slot */
inline check_batches(b, k)
{
    b = 0;
    do
    :: b < NB ->
        k = b * 2;              /* first attempt of batch b */
        if
        :: (nclose[k] == 0 || (b == 0 && nclose[1] == 0)) &&
           bpres[BP(b, 0)] + bpres[BP(b, 1)] != 1 ->
            printf("MSC: batch %d has an open attempt but is in %d slots\n", b,
                   bpres[BP(b, 0)] + bpres[BP(b, 1)]);
            lost_open_batch = true
        :: else -> skip
        fi;
        b++
    :: else -> break
    od;
    assert(!lost_open_batch);
    b = 0; k = 0
}

inline lock_batch(b) { atomic { xlock[b] == 0 && slock[b] == 0 -> xlock[b] = _pid } }

/* input item i repeats an earlier item's attempt (first occurrence wins) */
#ifdef NO_DEDUP
#define DUP(i, a) false
#else
#define DUP(i, a) ((i >= 1 && in_att[base + i - 1] == a) || (i == 2 && in_att[base] == a))
#endif

/* step 2: the statement's snapshot.  snap bit i = input item i will be closed */
inline take_snapshot()
{
    atomic {
        snap = 0;
        i = 0;
        do
        :: i < n ->
            a = in_att[base + i];
            if
            :: OPEN_EV(a) && !DUP(i, a) -> snap = snap | (1 << i)
            :: else -> skip                     /* closed, batch gone, or a duplicate */
            fi;
            i++
        :: else -> break
        od;
        bs0 = SLOT_OF(0);
        bs1 = SLOT_OF(1);
        i = 0; a = 0
    }
}

proctype Closer(byte who)
{
    byte base, n, i, a, snap, bs0, bs1, wrote;
    bool need0, need1, resent = false;

    base = (who - 1) * MAXIN;
    n = in_n[who - 1];
    need0 = (BATCH(in_att[base]) == 0 || (n > 1 && BATCH(in_att[base + 1]) == 0) ||
             (n > 2 && BATCH(in_att[base + 2]) == 0));
    need1 = (BATCH(in_att[base]) == 1 || (n > 1 && BATCH(in_att[base + 1]) == 1) ||
             (n > 2 && BATCH(in_att[base + 2]) == 1));
again:
#ifdef STALE_SNAPSHOT
    /* BUG: one statement takes the locks and reads the evidence; its snapshot
       is taken when the statement starts, before the locks are granted */
    take_snapshot();
    printf("MSC: closer %d reads closure evidence before taking its batch locks\n", who);
#endif
    /* step 1: exclusive batch locks */
#ifdef UNSORTED_LOCKS
    if
    :: need0 && need1 && BATCH(in_att[base]) == 1 ->  /* input order: 1, then 0 */
        lock_batch(1);
        printf("MSC: closer %d holds batch 1, requests batch 0\n", who);
        lock_batch(0)
    :: else ->
        if :: need0 -> lock_batch(0) :: else -> skip fi;
        if
        :: need1 ->
            if :: need0 -> printf("MSC: closer %d holds batch 0, requests batch 1\n", who) :: else -> skip fi;
            lock_batch(1)
        :: else -> skip
        fi
    fi;
#else
    if :: need0 -> lock_batch(0) :: else -> skip fi;      /* ascending batch_id */
    if
    :: need1 ->
        if :: need0 -> printf("MSC: closer %d holds batch 0, requests batch 1\n", who) :: else -> skip fi;
        lock_batch(1)
    :: else -> skip
    fi;
#endif
#ifndef STALE_SNAPSHOT
    take_snapshot();                            /* step 2: new statement, fresh snapshot */
#endif
    /* step 3: append closure rows (+ done rows), delete leases, commit, unlock */
    atomic {
        wrote = 0;
        i = 0;
        do
        :: i < n ->
            a = in_att[base + i];
            if
            :: snap & (1 << i) ->
                if
                :: nclose[a] > 0 && (wrote & (1 << a)) ->
                    printf("MSC: closer %d appends a second closure entry for attempt %d in the same call\n", who, a);
                    double_close = true
                :: nclose[a] > 0 && !(wrote & (1 << a)) ->
                    printf("MSC: closer %d closes attempt %d, already closed by closer %d\n", who, a, first_closer[a]);
                    double_close = true
                :: else ->
                    first_closer[a] = who;
                    outcome[a] = in_out[base + i]
                fi;
                wrote = wrote | (1 << a);
                nclose[a]++;
                if
                :: BATCH(a) == 0 -> crow[CR(bs0, a)]++
                :: else          -> crow[CR(bs1, a)]++
                fi;
                if :: in_out[base + i] != COMPLETED -> ndone[a]++ :: else -> skip fi;
                lease[a] = false
            :: else ->                          /* reported stale: must be true */
                if
                :: nclose[a] == 0 ->
                    printf("MSC: closer %d reports attempt %d stale, but nobody closed it\n", who, a);
                    false_stale = true
                :: else -> skip
                fi
            fi;
            i++
        :: else -> break
        od;
        assert(!double_close);
        assert(!false_stale);
        if :: xlock[0] == _pid -> xlock[0] = 0 :: else -> skip fi;
        if :: xlock[1] == _pid -> xlock[1] = 0 :: else -> skip fi;
        i = 0; a = 0; snap = 0; bs0 = 0; bs1 = 0; wrote = 0
    };
    if
    :: who == COMPLETER && !resent ->           /* commit outcome lost: re-send */
        resent = true;
        goto again
    :: else -> skip
    fi
}

proctype Heartbeat(byte a)
{
    bool open;
#ifndef HEARTBEAT_NOLOCK
    atomic { xlock[BATCH(a)] == 0 -> slock[BATCH(a)]++ };
#endif
    atomic { open = OPEN_EV(a) };               /* new statement: fresh snapshot */
    atomic {                                    /* upsert the lease row, commit */
        if
        :: open ->
            if
            :: CLOSED_EV(a) ->
                printf("MSC: heartbeat writes a lease row for closed attempt %d\n", a);
                orphan_lease = true
            :: else -> skip
            fi;
            lease[a] = true
        :: else -> skip                         /* closed: the worker is told to stop */
        fi;
        assert(!orphan_lease);
#ifndef HEARTBEAT_NOLOCK
        slock[BATCH(a)]--;
#endif
        open = false
    }
}

/* TRUNCATE claim slot 0 and commit; c0/c1 = closure entries carried */
inline truncate_sealed(carried)
{
    if
    :: crow[CR(0, 0)] > c0 || crow[CR(0, 1)] > c1 ->
        printf("MSC: TRUNCATE claim slot 0 drops a closure entry of batch 0 that was not carried\n")
    :: else -> skip
    fi;
    if
    :: carried ->
        bpres[BP(0, 1)] = true;
        crow[CR(1, 0)] = crow[CR(1, 0)] + c0;
        crow[CR(1, 1)] = crow[CR(1, 1)] + c1
    :: else -> skip
    fi;
    bpres[BP(0, 0)] = false;
    bpres[BP(1, 0)] = false;
    crow[CR(0, 0)] = 0; crow[CR(0, 1)] = 0; crow[CR(0, 2)] = 0;
    check_batches(b, k)
}

proctype Prune()
{
    bool all_closed, got = false;
    byte c0, c1, b, k;

    /* plain read: is batch 0 (the only batch in slot 0) fully closed? */
    atomic { all_closed = (bpres[BP(0, 0)] && crow[CR(0, 0)] + crow[CR(0, 1)] == NITEMS(0)) };
    if
    :: all_closed ->
        atomic {
            c0 = crow[CR(0, 0)]; c1 = crow[CR(0, 1)];
            truncate_sealed(false);
            all_closed = false; c0 = 0; c1 = 0
        }
    :: else ->
#ifdef PRUNE_NOLOCK
        got = true;                             /* BUG: no try-lock */
#else
        atomic {                                /* pg_try_advisory_xact_lock */
            if
            :: xlock[0] == 0 && slock[0] == 0 -> xlock[0] = _pid; got = true
            :: else -> skip                     /* held: skip this prune */
            fi
        };
#endif
        if
        :: got ->
            /* new statement: copy batch 0 and its closure rows into slot 1
               (uncommitted: invisible until commit) */
            atomic { c0 = crow[CR(0, 0)]; c1 = crow[CR(0, 1)] };
            atomic {                            /* TRUNCATE, commit, unlock */
                truncate_sealed(true);
                if :: xlock[0] == _pid -> xlock[0] = 0 :: else -> skip fi;
                got = false; c0 = 0; c1 = 0
            }
        :: else -> skip
        fi
    fi
}

init
{
    byte a, b, k;
    atomic {
        /* completer flush: [2 dlq, 0 completed, 0 retried] */
        in_n[0] = 3;
        in_att[0] = 2; in_out[0] = DLQ;
        in_att[1] = 0; in_out[1] = COMPLETED;
        in_att[2] = 0; in_out[2] = RETRIED;
        /* rescuer: [0 rescued, 2 rescued] */
        in_n[1] = 2;
        in_att[3] = 0; in_out[3] = RESCUED;
        in_att[4] = 2; in_out[4] = RESCUED;
        /* canceller: [0 cancelled] or [1 cancelled] */
        in_n[2] = 1;
        if :: in_att[6] = 0 :: in_att[6] = 1 fi;
        in_out[6] = CANCELLED;

        bpres[BP(0, 0)] = true;                 /* batch 0 in the sealed slot */
        bpres[BP(1, 1)] = true;                 /* batch 1 in the current slot */

        run Closer(COMPLETER); run Closer(RESCUER); run Closer(CANCELLER);
        if :: run Heartbeat(0) :: run Heartbeat(1) fi;
        run Prune()
    };
    /* every other process has ended; a wait cycle leaves this blocked */
    _nr_pr == 1 ->
    atomic {
        a = 0;
        do
        :: a < NA ->
            /* exactly one outcome for every attempt some closer was given
               (attempt 1 only if the canceller took it), none for the rest */
            assert(nclose[a] == (a != 1 || in_att[6] == 1 -> 1 : 0));
            assert(ndone[a] == (nclose[a] == 1 && outcome[a] != COMPLETED -> 1 : 0));
            assert(!(lease[a] && CLOSED_EV(a)));         /* no orphan lease */
            a++
        :: else -> break
        od;
        check_batches(b, k)
    }
}
