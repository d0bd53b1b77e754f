/*
 * batch_completion.pml -- a batch's completion job is enqueued exactly once,
 * and only after every member of the sealed batch has ended
 * (docs/correctness.md, I9).
 *
 * Resources
 *   The batch row.  sealed (no more members once true), members (how many
 *     were added), ended (how many of those have ended).  Every change to it
 *     is made under its row lock, held to the end of the transaction.
 *   The completion job.  completions counts the completion jobs enqueued
 *     (a ghost: the job rows themselves are not modelled).
 *
 * Plans (one process per transaction chain)
 *   Member     (three of them) 1. add: under the row lock, if the batch is not
 *                 sealed, members++ and commit; if it is sealed the member is
 *                 refused and never becomes part of the batch;
 *              2. later, the member's closer transaction: under the row lock,
 *                 ended++; if that made (sealed && ended == members) true,
 *                 enqueue the completion job in the same transaction; commit.
 *   Sealer     (one) under the row lock: sealed = true; if that made
 *              (sealed && ended == members) true, enqueue the completion job;
 *              commit.
 *   So the state (sealed && ended == members) is made true by exactly one
 *   transaction, the one that holds the row lock when it becomes true, and
 *   that transaction decides from the row as it is under the lock.
 *
 * Abstractions
 *   - A transaction's work under the row lock is one atomic step: the lock
 *     is held to commit, the row as read under it is the latest committed
 *     version, and the enqueue commits with the update.
 *   - A batch sealed with no member completes at once (sealed, 0 == 0); a
 *     member refused by a sealed batch has no other effect here.
 *   - What a member is (a job of the batch), how it ends (completed,
 *     failed, cancelled: all count as "ended") and the closure itself are
 *     left out; the closer is "the transaction that ends the member".
 *
 * Checks (pan -DSAFETY)
 *   - the completion job is never enqueued while an added member has not
 *     ended (assert(!premature_completion) at every enqueue);
 *   - it is never enqueued twice (assert(!double_completion));
 *   - once every process has ended: it was enqueued exactly once
 *     (assert(!missing_completion)).
 *
 * Variants
 *   -DREAD_THEN_WRITE   the member's closer and the sealer read the batch row
 *                       with a plain read before taking the row lock, then
 *                       update it under the lock, and decide on the completion
 *                       from what they read (with their own change applied).
 *                       The last member's closer and the sealer both read
 *                       before the other's update, each sees the batch still
 *                       incomplete, and nobody enqueues.  (A sealer that read
 *                       the member count before a late member was added
 *                       enqueues too early, and that member's closer, which
 *                       reads the batch sealed, enqueues a second time.)
 */

#define NM 3                    /* members */

/* the batch row */
bool sealed = false;
byte members = 0;
byte ended = 0;

/* ghosts */
byte completions = 0;
bool premature_completion = false;
bool double_completion = false;
bool missing_completion = false;

/* enqueue the completion job; m = the member whose closer does it, NM = sealer */
inline enqueue_completion(m)
{
    completions++;
    if
    :: m == NM -> printf("MSC: sealer enqueues the completion job\n")
    :: else -> printf("MSC: closer of member %d enqueues the completion job\n", m)
    fi;
    if
    :: ended != members ->
        printf("MSC: completion job enqueued with %d of %d members ended\n", ended, members);
        premature_completion = true
    :: else -> skip
    fi;
    if
    :: completions > 1 ->
        printf("MSC: completion job enqueued %d times\n", completions);
        double_completion = true
    :: else -> skip
    fi;
    assert(!premature_completion);
    assert(!double_completion)
}

proctype Member(byte m)
{
    bool added = false;
#ifdef READ_THEN_WRITE
    bool rs;
    byte rm, re;
#endif

    /* 1. add, under the row lock, only while not sealed */
    atomic {
        if
        :: !sealed ->
            members++; added = true;
            printf("MSC: member %d added: %d members\n", m, members)
        :: else -> printf("MSC: member %d refused: batch sealed\n", m)
        fi
    };
    if
    :: added ->
#ifdef READ_THEN_WRITE
        /* 2. BUG: plain read of the row, before the lock */
        atomic {
            rs = sealed; rm = members; re = ended;
            printf("MSC: closer of member %d reads sealed %d, %d of %d ended\n", m, rs, re, rm)
        };
        /* update under the lock, decide from the earlier read */
        atomic {
            ended++;
            printf("MSC: closer of member %d ends it: %d of %d ended\n", m, ended, members);
            if
            :: rs && re + 1 == rm -> enqueue_completion(m)
            :: else -> skip
            fi;
            rs = false; rm = 0; re = 0
        }
#else
        /* 2. the member's closer, under the row lock */
        atomic {
            ended++;
            printf("MSC: closer of member %d ends it: %d of %d ended\n", m, ended, members);
            if
            :: sealed && ended == members -> enqueue_completion(m)
            :: else -> skip
            fi
        }
#endif
    :: else -> skip
    fi
}

proctype Sealer()
{
#ifdef READ_THEN_WRITE
    byte rm, re;

    /* BUG: plain read of the row, before the lock */
    atomic {
        rm = members; re = ended;
        printf("MSC: sealer reads %d of %d ended\n", re, rm)
    };
    atomic {
        sealed = true;
        printf("MSC: sealer seals the batch: %d of %d ended\n", ended, members);
        if
        :: re == rm -> enqueue_completion(NM)
        :: else -> skip
        fi;
        rm = 0; re = 0
    }
#else
    atomic {
        sealed = true;
        printf("MSC: sealer seals the batch: %d of %d ended\n", ended, members);
        if
        :: ended == members -> enqueue_completion(NM)
        :: else -> skip
        fi
    }
#endif
}

init
{
    byte m;
    atomic {
        /* start order only steers which READ_THEN_WRITE trail pan reports
           first (the lost completion, which scripts/models expects) */
        run Sealer();
        m = 0;
        do
        :: m < NM -> run Member(m); m++
        :: else -> break
        od;
        m = 0
    };
    /* every other process has ended */
    _nr_pr == 1 ->
    atomic {
        assert(sealed && ended == members);
        if
        :: completions != 1 ->
            printf("MSC: %d completion jobs after every process ended (%d of %d members ended)\n",
                   completions, ended, members);
            missing_completion = true
        :: else -> skip
        fi;
        assert(!missing_completion)
    }
}
