/*
 * lane_visibility.pml -- per-lane visibility and FIFO (docs/design/engine.md,
 * "The ordering contract" and "Reserving a lane range"; docs/correctness.md, I3
 * and I4).
 *
 * What is modelled
 *   One lane (queue, priority, enqueue_shard).  NPROD producers each run NTXN
 *   enqueue transactions, one after the other; each transaction
 *     1. takes the lane lock (pg_advisory_xact_lock on the lane key; blocking),
 *     2. reserves a contiguous range of 1 or 2 lane_seq values
 *        (start = nextval(seq); setval(seq, start + n - 1)),
 *     3. inserts its rows (uncommitted: invisible to everybody else),
 *     4. commits or rolls back (nondeterministic).  The sequence is not
 *        transactional: a rolled-back range is a permanent gap.
 *   The lane lock is transaction-scoped, so it is released at step 4.
 *
 *   One claimer repeatedly runs claim_ready_runtime for this lane.  Each call
 *   sees one snapshot: only committed rows are visible.  With its claim cursor
 *   at N it
 *     - claims N if N is visible;
 *     - otherwise, if some visible row N+k exists, treats it as proof that every
 *       row below it is final (rolled back) and jumps over the gap to the lowest
 *       visible row above N, claims it and moves the cursor past it;
 *     - otherwise claims nothing (the head is not visible: it may be an
 *       uncommitted reservation that can still commit).
 *   The claim cursor is transactional on the locked claim-head row, so one call
 *   is one atomic step.  Concurrent claimers of the same lane are serialised by
 *   FOR UPDATE ... SKIP LOCKED on that row (the loser skips the lane), so one
 *   claimer process covers every interleaving that matters for this lane.
 *
 * Abstractions
 *   - Row states: 0 = not reserved, PENDING = reserved/inserted but not
 *     committed (can still commit), COMMITTED (visible), ROLLEDBACK (final gap).
 *   - "max_committed" is the highest visible lane_seq; it is only used as the
 *     claimer's enabling guard ("there is something visible at or above my
 *     cursor"), which the real function computes from the same snapshot.
 *   - Tombstones, run_at, priority aging and receipts are irrelevant to the
 *     ordering argument and are left out.
 *
 * Invariants checked
 *   (a) the claimer never observes a visible N+1 while N can still commit
 *       (ghost flag, sticky, asserted at quiescence);
 *   (b) no row the claimer jumped over as a gap ever commits
 *       (assert(!skipped_row_committed) at commit time) and no committed row is
 *       left unclaimed at quiescence;
 *   (c) no row is claimed twice;
 *   (d) claims come in strictly increasing lane_seq order.
 *
 * Variant
 *   -DBROKEN  the producer releases the lane lock right after reserving its
 *             range, before commit.  A later producer can then commit N+1 while
 *             N is still in flight; the claimer jumps over N, and N commits
 *             afterwards: a committed job that is never claimed.
 */

#define NPROD      3
#define NTXN       2            /* enqueue transactions per producer          */
#define MAXROWS    13           /* lane_seq 1..12 (3 x 2 txns x up to 2 rows) */

#define FREE       0
#define PENDING    1
#define COMMITTED  2
#define ROLLEDBACK 3

byte row[MAXROWS];              /* state of lane_seq i                        */
byte next_seq = 1;              /* the lane's sequence                        */
byte lane_lock = 0;             /* 0 = free, else producer id                 */
byte max_committed = 0;         /* highest visible lane_seq                   */
byte finished_txns = 0;

byte cursor = 1;                /* claim cursor: next lane_seq to look at     */
byte last_claimed = 0;
bool claimed_row[MAXROWS];
bool skipped[MAXROWS];          /* ghost: claimer jumped over this lane_seq   */

bool skipped_row_committed = false;              /* ghost for (b) */
bool claimer_saw_row_above_uncommitted = false;  /* ghost for (a) */

proctype Producer(byte id)
{
    byte start, n, i, t = 0;

again:
    atomic { lane_lock == 0 -> lane_lock = id };      /* advisory xact lock: waits */

    if :: n = 1 :: n = 2 fi;
    atomic {                                          /* reserve contiguous range + insert */
        start = next_seq;
        next_seq = next_seq + n;
        i = start;
        do
        :: i < start + n -> row[i] = PENDING; i++
        :: else -> break
        od
    };
#ifdef BROKEN
    lane_lock = 0;                                    /* BUG: lock dropped before commit */
#endif

    atomic {                                          /* end of transaction */
        i = start;
        if
        :: /* COMMIT */
            skip;
            do
            :: i < start + n ->
                if
                :: skipped[i] ->
                    printf("MSC: lane_seq %d commits after the claimer skipped it as a gap\n", i);
                    skipped_row_committed = true
                :: else -> skip
                fi;
                row[i] = COMMITTED;
                if :: i > max_committed -> max_committed = i :: else -> skip fi;
                i++
            :: else -> break
            od;
            assert(!skipped_row_committed)
        :: /* ROLLBACK: the reserved range stays a permanent gap */
            skip;
            do
            :: i < start + n -> row[i] = ROLLEDBACK; i++
            :: else -> break
            od
        fi;
#ifndef BROKEN
        lane_lock = 0;                                /* released at commit/rollback */
#endif
        finished_txns++;
        i = 0; start = 0; n = 0;
        t++
    };
    if
    :: t < NTXN -> goto again
    :: else -> skip
    fi
}

proctype Claimer()
{
    byte m, i;
end_claimer:
    do
    :: atomic {
        max_committed >= cursor ->                    /* something visible at/after head */
        /* (a): does this snapshot show a visible row above a row that can still commit? */
        i = 1;
        do
        :: i < max_committed ->
            if :: row[i] == PENDING -> claimer_saw_row_above_uncommitted = true :: else -> skip fi;
            i++
        :: else -> break
        od;
        /* the lowest visible row at or above the cursor */
        m = cursor;
        do
        :: row[m] == COMMITTED -> break
        :: else -> m++
        od;
        /* rows cursor..m-1 are not visible; a visible m "proves" them final */
        i = cursor;
        do
        :: i < m ->
            assert(row[i] != COMMITTED);
            skipped[i] = true;
            i++
        :: else -> break
        od;
        assert(!claimed_row[m]);                      /* (c) never claimed twice   */
        assert(m > last_claimed);                     /* (d) lane_seq order        */
        claimed_row[m] = true;
        last_claimed = m;
        cursor = m + 1;
        m = 0; i = 0
       }
    od
}

init
{
    byte i;
    atomic {
        run Producer(1); run Producer(2); run Producer(3);
        run Claimer()
    };
    timeout ->                                        /* quiescence */
    atomic {
        assert(finished_txns == NPROD * NTXN);
        assert(!claimer_saw_row_above_uncommitted);  /* (a) */
        i = 1;
        do
        :: i < MAXROWS ->
            assert(row[i] != PENDING);
            assert(row[i] != COMMITTED || claimed_row[i]);   /* (b) nothing committed left behind */
            i++
        :: else -> break
        od
    }
}
