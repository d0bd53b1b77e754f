/*
 * sharded_prune.pml -- queue-ring prune across enqueue shards (docs/design/rings.md,
 * "The three rings"; docs/correctness.md, I1 and I2).
 *
 * What is modelled
 *   One (queue, priority) with two enqueue shards.  Each shard has its own
 *   lane_seq counter starting at 1, so both shards legitimately own a row with
 *   lane_seq = 1 (the ready/done primary keys are only unique because they
 *   include enqueue_shard).  The queue ring has two slots; ready_entries and
 *   done_entries share the ring (done rows are keyed by the job's own
 *   (ready_slot, queue, priority, enqueue_shard, lane_seq)).
 *
 *   Processes: two producers (each enqueues JOBS_PER_PRODUCER jobs, every job on
 *   a nondeterministically chosen shard), one worker (claim from any shard's
 *   head, complete any in-flight attempt, in any interleaving), one maintenance
 *   leader (bounded number of ring rotations and prunes).
 *
 * Abstractions (and why they are sound for this property)
 *   - An enqueue is one atomic step after the producer has read the current
 *     slot: reserve lane_seq, insert the ready row, commit.  The lane lock is
 *     held until commit, so per lane commit order == lane_seq order; that part is
 *     checked separately in lane_visibility.pml.  The producer reads the ring
 *     state with a plain read *before* its insert, so it may insert into a slot
 *     that was sealed in between -- this is exactly what prune's lock + re-check
 *     must cope with.
 *   - The ready-row insert and TRUNCATE conflict on the partition's table lock
 *     (RowExclusive vs AccessExclusive), so an insert happens entirely before or
 *     entirely after the locked part of a prune: both are atomic blocks here.
 *   - A claim (lock claim head, take the row at the shard's cursor, advance the
 *     cursor, write receipt) is one atomic step; claim-path details (gaps,
 *     SKIP LOCKED) live in lane_visibility.pml and lock_order.pml.
 *   - An in-flight attempt (claimed, no done row yet) stands in for "open receipt
 *     or active lease": the correct prune treats it as live because no done row
 *     matches it.
 *   - Terminal counts survive TRUNCATE via rollup counters; the ghost array
 *     finished[] plays that role, so truncating a done row loses nothing.
 *
 * Correct prune predicate (per ready row r in the victim slot), matched on the
 * full lane key (enqueue_shard, lane_seq) -- queue and priority are constant:
 *     pending(r) = r.lane_seq >= claim_seq[r.enqueue_shard]        (unclaimed)
 *               || no done row d in the slot with
 *                  (d.enqueue_shard, d.lane_seq) == (r.enqueue_shard, r.lane_seq)
 * The slot may be truncated only if no ready row in it is pending, evaluated
 * again after taking the ring-state lock and the table lock.
 *
 * Variants
 *   -DBROKEN      both matches drop enqueue_shard (lane_seq only): a ready row
 *                 counts as claimed if *any* shard's cursor passed its lane_seq
 *                 and as done if *any* done row has its lane_seq.  Spin finds
 *                 shard 0's completed row 1 masking shard 1's pending row 1.
 *   -DNO_RECHECK  prune trusts its unlocked pre-check and truncates without
 *                 re-checking under the locks; a producer that read the ring
 *                 state before rotation slips a row into the sealed slot.
 *
 * Checked: assert(!truncated_pending_ready_row) at every TRUNCATE; at quiescence
 * (timeout) every enqueued job reached a terminal (done) state, i.e. no job
 * disappeared without a done row.
 */

#define NSHARDS            2
#define NPRODUCERS         2
#define JOBS_PER_PRODUCER  2
#define NJOBS              4      /* NPRODUCERS * JOBS_PER_PRODUCER */
#define NSLOTS             2
#define MAXSEQ             5      /* lane_seq 1..NJOBS per shard, index 0 unused */
#define MAX_ROTATIONS      2
#define MAX_PRUNES         2

#define IDX(s, q)  ((s) * MAXSEQ + (q))

byte cur = 0;                      /* current (open) queue-ring slot            */
byte next_seq[NSHARDS];            /* per-shard lane_seq counters (start at 1)   */
byte claim_seq[NSHARDS];           /* per-shard claim cursor: next seq to claim  */

byte njobs = 0;
byte job_shard[NJOBS];
byte job_seq[NJOBS];
byte job_slot[NJOBS];              /* ready_slot, also the slot of its done row  */
bool ready_present[NJOBS];         /* ready row exists (not truncated)           */
bool done_present[NJOBS];          /* done row exists at the job's own key       */
bool claimed[NJOBS];
bool finished[NJOBS];              /* ghost: terminal fact recorded (rollup)     */
byte job_at[NSHARDS * MAXSEQ];     /* (shard, lane_seq) -> job id                */

bool truncated_pending_ready_row = false;   /* ghost: the safety violation */

/* pending(j) for a ready row of job j; result in `res`.  Deterministic scan. */
inline pending(j, res, k, s)
{
    res = false;
#ifdef BROKEN
    /* claimed if ANY shard's cursor is past this lane_seq (join without shard) */
    res = true;
    s = 0;
    do
    :: s < NSHARDS -> if :: job_seq[j] < claim_seq[s] -> res = false :: else -> skip fi; s++
    :: else -> break
    od;
#else
    res = (job_seq[j] >= claim_seq[job_shard[j]]);
#endif
    if
    :: !res ->
        /* claimed: pending unless a done row in the same slot matches its key */
        res = true;
        k = 0;
        do
        :: k < NJOBS ->
            if
#ifdef BROKEN
            :: done_present[k] && job_slot[k] == job_slot[j] && job_seq[k] == job_seq[j]
#else
            :: done_present[k] && job_slot[k] == job_slot[j] && job_seq[k] == job_seq[j] &&
               job_shard[k] == job_shard[j]
#endif
               -> res = false
            :: else -> skip
            fi;
            k++
        :: else -> break
        od
    :: else -> skip
    fi
}

/* slot_prunable(v): no ready row in slot v is pending */
inline slot_prunable(v, ok, j, res, k, s)
{
    ok = true;
    j = 0;
    do
    :: j < NJOBS ->
        if
        :: j < njobs && ready_present[j] && job_slot[j] == v ->
            pending(j, res, k, s);
            if :: res -> ok = false :: else -> skip fi
        :: else -> skip
        fi;
        j++
    :: else -> break
    od
}

inline slot_empty(v, ok, j)
{
    ok = true;
    j = 0;
    do
    :: j < NJOBS ->
        if
        :: j < njobs && (ready_present[j] || done_present[j]) && job_slot[j] == v -> ok = false
        :: else -> skip
        fi;
        j++
    :: else -> break
    od
}

proctype Producer()
{
    byte n = 0, slot, s, j;
    do
    :: n < JOBS_PER_PRODUCER ->
        slot = cur;                         /* plain read of the ring state */
        if :: s = 0 :: s = 1 fi;            /* rotor / ordering-key hash: any shard */
        atomic {                            /* reserve + insert + commit */
            j = njobs;
            njobs++;
            job_shard[j] = s;
            job_seq[j] = next_seq[s];
            next_seq[s]++;
            job_slot[j] = slot;
            job_at[IDX(s, job_seq[j])] = j;
            ready_present[j] = true;
            j = 0; slot = 0; s = 0
        };
        n++
    :: else -> break
    od
}

/* claim the head row of shard S: committed, unclaimed, ready row readable */
#define CLAIM(S) \
    :: atomic { claim_seq[S] < next_seq[S] && ready_present[job_at[IDX(S, claim_seq[S])]] -> \
                j = job_at[IDX(S, claim_seq[S])]; \
                assert(!claimed[j]); \
                claimed[j] = true; \
                claim_seq[S]++; \
                j = 0 }

/* complete in-flight attempt J: INSERT done row at its own key (first closer wins) */
#define COMPLETE(J) \
    :: atomic { claimed[J] && !finished[J] -> \
                done_present[J] = true; \
                finished[J] = true }

proctype Worker()
{
    byte j;
end_worker:
    do
    CLAIM(0)
    CLAIM(1)
    COMPLETE(0)
    COMPLETE(1)
    COMPLETE(2)
    COMPLETE(3)
    od
}

proctype Maintenance()
{
    byte rot = 0, pr = 0, victim, j, k, s;
    bool ok, res;
end_maint:
    do
    :: rot < MAX_ROTATIONS ->
        atomic {                            /* ring-state lock; rotate only onto an empty slot */
            slot_empty((cur + 1) % NSLOTS, ok, j);
            if :: ok -> cur = (cur + 1) % NSLOTS :: else -> skip fi;
            rot++;
            j = 0; ok = false
        }
    :: pr < MAX_PRUNES ->
        /* 1. unlocked pre-check of the oldest sealed slot (MVCC read) */
        atomic {
            victim = (cur + 1) % NSLOTS;
            slot_prunable(victim, ok, j, res, k, s);
            j = 0; k = 0; s = 0; res = false    /* scratch reset: keep the state space small */
        };
        /* 2. ring-state lock + ACCESS EXCLUSIVE on the victim partitions,
         *    re-check, TRUNCATE, commit: one atomic step */
        atomic {
#ifndef NO_RECHECK
            if
            :: ok && victim != cur -> slot_prunable(victim, ok, j, res, k, s)
            :: else -> ok = false
            fi;
#endif
            if
            :: ok ->
                j = 0;
                do
                :: j < NJOBS ->
                    if
                    :: j < njobs && job_slot[j] == victim ->
                        if
                        :: ready_present[j] && !finished[j] ->
                            printf("MSC: TRUNCATE slot %d drops pending ready row (enqueue_shard %d, lane_seq %d)\n",
                                   victim, job_shard[j], job_seq[j]);
                            truncated_pending_ready_row = true
                        :: else -> skip
                        fi;
                        ready_present[j] = false;
                        done_present[j] = false
                    :: else -> skip
                    fi;
                    j++
                :: else -> break
                od;
                assert(!truncated_pending_ready_row)
            :: else -> skip
            fi;
            j = 0; k = 0; s = 0; res = false; ok = false; victim = 0
        };
        pr++
    od
}

init
{
    byte j;
    atomic {
        next_seq[0] = 1; next_seq[1] = 1;
        claim_seq[0] = 1; claim_seq[1] = 1;
        run Producer(); run Producer();
        run Worker();
        run Maintenance()
    };
    /* quiescence: nothing else can move.  Every enqueued job must be done. */
    timeout ->
    atomic {
        assert(njobs == NJOBS);
        j = 0;
        do
        :: j < NJOBS -> assert(finished[j]); j++
        :: else -> break
        od
    }
}
