/*
 * dependency_release.pml -- a child job that depends on two parents is
 * released (or ended) exactly once, and only after its parents decided it
 * (docs/correctness.md, I8).
 *
 * Resources
 *   Parents.  Two parent jobs P0 and P1.  Each ends exactly once, completed or
 *     failed (chosen by init).  pstate[p] is the parent's end as committed:
 *     OPEN until its closer commits.
 *   Ender locks.  Per parent, the transaction-scoped advisory lock its closer
 *     takes exclusive before it writes the end: the claim batch's lock for a
 *     running parent (close_attempts), the job's end lock for one ended
 *     without an attempt (cancel_job).  xlock[p] = p's closer holds it.
 *   Dependency edges.  edge[p]: the row (parent p -> child) the child's
 *     enqueue inserted, NONE if it inserted none for p; UNRESOLVED until a
 *     closer, the verifier or the child's own end resolves it.  An edge
 *     becomes visible when the child's transaction commits.
 *   The child row.  child: NOT_YET (not committed), WAITING, AVAILABLE
 *     (released) or ENDED (cancelled); pending = the edges not yet resolved;
 *     verified = the leader's re-check has run (true at once when pending
 *     starts at 0); policy = what a failed parent does to the child: CANCEL
 *     (the child is cancelled) or RUN (a failed parent counts as done).  The
 *     third policy, "fail", ends the child as failed instead of cancelled:
 *     the same transitions as CANCEL, so it is not a separate choice here.
 *
 * Plans (one process per transaction; READ COMMITTED)
 *   Child      the child's enqueue, one transaction:
 *              1. per parent, one statement: read its state; an end committed
 *                 there is resolved at once (completed, or failed with RUN:
 *                 done; failed with CANCEL: the child is born ended);
 *              2. commit: an UNRESOLVED edge per parent it saw open, the child
 *                 WAITING with pending = that number; with pending = 0 (and
 *                 not born ended) it is AVAILABLE at once.
 *   Closer     of parent p, one transaction:
 *              1. exclusive ender lock on p (blocking);
 *              2. NEW statement, so a snapshot taken after the lock: the
 *                 committed UNRESOLVED edges of p (close_attempts probes for
 *                 pending edges right after its locks, and resolves them in
 *                 a later statement; one lookup after the lock stands for
 *                 both);
 *              3. writes p's end, resolves every edge it saw, commit (the end
 *                 and the resolutions become visible together), unlock.
 *   Verifier   the leader, once, after the child's commit:
 *              1. reads the unverified child's UNRESOLVED edges;
 *              2. per such edge: waits for the parent's ender lock (takes it
 *                 shared and drops it at once: waiting is all it needs), then
 *                 a NEW statement reads the parent's state;
 *              3. resolves the edges of the parents it found ended, sets
 *                 verified, commit.
 *   Resolving edge p (closer or verifier) happens under the child row's lock
 *   and the edge's row lock: only if the edge is still UNRESOLVED is it marked
 *   RESOLVED and then either the child ended (p failed, policy CANCEL, child
 *   still WAITING; ending the child resolves its other edges too) or pending
 *   decremented; the one whose decrement reaches 0 while the child is WAITING
 *   releases it.
 *
 * Abstractions
 *   - Snapshots are explicit: a statement copies what it reads into locals
 *     and decides from that copy.  A commit makes the writes visible and
 *     releases the locks in one step.
 *   - Row locks (child row, edge) are not modelled as locks: a resolution is
 *     one atomic step.  The closer's resolutions are applied at its commit,
 *     together with its parent's end: a resolution made earlier in its
 *     transaction holds the row locks to the commit, so nobody else can act on
 *     that edge or on the child row in between.  The verifier resolves in one
 *     step just before its commit, for the same reason.
 *   - The parents are in different claim batches (or have no attempt), and
 *     each is "in its batch" from the start: a parent that the verifier finds
 *     not yet claimed has no closer in flight, so whoever ends it later looks
 *     up edges after the child's commit.  The closure itself is I7's job.
 *   - One child, one verifier run; a failed child's own children (the
 *     policy's cascade) are the same protocol one level down.
 *
 * Checks (pan -DSAFETY)
 *   - the child is released at most once, ended at most once, never both
 *     (assert(!double_outcome) at every release and end);
 *   - the child is never released while a parent has not ended, nor with
 *     policy CANCEL when a parent failed (assert(!early_release)); "ended"
 *     includes the releasing closer's own parent, whose end commits with the
 *     release;
 *   - once every process has ended (init waits for them): the child is not
 *     WAITING (assert(!child_stuck)); it is AVAILABLE iff every parent
 *     completed or the policy is RUN, else ENDED (assert(!wrong_outcome));
 *     no edge is left UNRESOLVED (assert(!unresolved_edge)); the child is
 *     verified.
 *
 * Variants
 *   -DNO_VERIFIER        no leader re-check: the child's enqueue sees a parent
 *                        open, that parent's closer looks up edges before the
 *                        child's commit and finds none, and nobody ever
 *                        resolves the edge: the child stays WAITING.
 *   -DNO_RESOLVED_CHECK  resolving does not check that the edge is still
 *                        UNRESOLVED: the verifier read the edge before the
 *                        closer's commit, resolves it a second time, and the
 *                        double decrement releases the child while the other
 *                        parent is still open.
 *   -DVERIFIER_NOLOCK    the verifier reads the parent's state without waiting
 *                        for its ender lock, so it sees the parent open while
 *                        the closer's end is uncommitted -- and that closer's
 *                        lookup ran before the child's commit: nobody resolves
 *                        the edge, the child stays WAITING.
 */

#define NP        2             /* parents                                     */

/* parent states (committed) */
#define OPEN      0
#define COMPLETED 1
#define FAILED    2

/* edge states */
#define NONE       0
#define UNRESOLVED 1
#define RESOLVED   2

/* child states */
#define NOT_YET   0             /* the child's enqueue has not committed       */
#define WAITING   1
#define AVAILABLE 2
#define ENDED     3

/* policies */
#define CANCEL    0             /* also stands for "fail"                      */
#define RUN       1

#define VERIFIER  NP            /* resolver id; closers are 0 .. NP-1          */

byte pend[NP];                  /* the end each parent will get (set by init)  */
byte pstate[NP];                /* committed parent state                      */
bool xlock[NP];                 /* ender lock held by p's closer               */
byte edge[NP];
byte child = NOT_YET;
byte pending;
bool verified = false;
byte policy;

/* ghosts */
byte n_release;
byte n_end;
bool double_outcome = false;
bool early_release = false;
bool child_stuck = false;
bool wrong_outcome = false;
bool unresolved_edge = false;

#define KILLS(s)  ((s) == FAILED && policy == CANCEL)

inline note_outcome()
{
    if
    :: n_release + n_end > 1 ->
        printf("MSC: child released %d times and ended %d times\n", n_release, n_end);
        double_outcome = true
    :: else -> skip
    fi;
    assert(!double_outcome)
}

/* release the child; every parent must have ended (committed, or in the
   releasing closer's own transaction: pstate[] is already set there) */
inline release_child()
{
    child = AVAILABLE;
    n_release++;
    printf("MSC: child released (waiting -> available)\n");
    if
    :: pstate[0] == OPEN || pstate[1] == OPEN ->
        printf("MSC: child released while parent %d has not ended\n",
               (pstate[0] == OPEN -> 0 : 1));
        early_release = true
    :: KILLS(pstate[0]) || KILLS(pstate[1]) ->
        printf("MSC: child released although a parent failed (policy cancel)\n");
        early_release = true
    :: else -> skip
    fi;
    assert(!early_release);
    note_outcome()
}

/* end the child (cancelled); its other pending edges stop being pending */
inline end_child()
{
    child = ENDED;
    n_end++;
    printf("MSC: child ended (cancelled)\n");
    if :: edge[0] == UNRESOLVED -> edge[0] = RESOLVED :: else -> skip fi;
    if :: edge[1] == UNRESOLVED -> edge[1] = RESOLVED :: else -> skip fi;
    note_outcome()
}

/* resolve edge e, under the child row's lock and the edge's row lock */
inline resolve(e, who)
{
    if
#ifdef NO_RESOLVED_CHECK
    :: true ->                          /* BUG: no check under the row lock */
        if
        :: edge[e] == RESOLVED && who == VERIFIER ->
            printf("MSC: verifier resolves the edge of parent %d a second time\n", e)
        :: edge[e] == RESOLVED && who != VERIFIER ->
            printf("MSC: closer of parent %d resolves its edge a second time\n", e)
        :: else -> skip
        fi;
#else
    :: edge[e] == UNRESOLVED ->
#endif
        if
        :: edge[e] == UNRESOLVED && who == VERIFIER ->
            printf("MSC: verifier resolves the edge of parent %d\n", e)
        :: edge[e] == UNRESOLVED && who != VERIFIER ->
            printf("MSC: closer of parent %d resolves its edge\n", e)
        :: else -> skip
        fi;
        edge[e] = RESOLVED;
        if
        :: KILLS(pstate[e]) ->
            if
            :: child == WAITING -> end_child()
            :: else -> skip
            fi
        :: else ->
            if :: pending > 0 -> pending-- :: else -> skip fi;
            if
            :: pending == 0 && child == WAITING -> release_child()
            :: else -> skip
            fi
        fi
    :: else -> skip                     /* already resolved: nothing to do */
    fi
}

proctype Closer(byte p)
{
    bool seen;

    /* 1. exclusive ender lock */
    atomic { !xlock[p] -> xlock[p] = true };
    /* 2. new statement: which unresolved edges of p are committed? */
    atomic {
        seen = (edge[p] == UNRESOLVED);
        if
        :: !seen && child == NOT_YET ->
            printf("MSC: closer of parent %d looks up edges before the child's commit: none\n", p)
        :: else -> skip
        fi
    };
    /* 3. write the end, resolve what it saw, commit, unlock */
    atomic {
        pstate[p] = pend[p];
        if
        :: pend[p] == COMPLETED -> printf("MSC: closer of parent %d commits: completed\n", p)
        :: else -> printf("MSC: closer of parent %d commits: failed\n", p)
        fi;
        if
        :: seen -> resolve(p, p)
        :: else -> skip
        fi;
        xlock[p] = false;
        seen = false
    }
}

proctype Child()
{
    byte snap[NP];
    byte p;

    /* 1. one statement per parent: its state */
    do
    :: p < NP ->
        atomic {
            snap[p] = pstate[p];
            if
            :: snap[p] == OPEN ->
                printf("MSC: child's enqueue sees parent %d open\n", p)
            :: else -> skip
            fi;
            p++
        }
    :: else -> break
    od;
    /* 2. commit: edges for the parents it saw open, the child row */
    atomic {
        pending = 0;
        p = 0;
        do
        :: p < NP ->
            if
            :: snap[p] == OPEN -> edge[p] = UNRESOLVED; pending++
            :: else -> skip              /* resolved at once */
            fi;
            p++
        :: else -> break
        od;
        verified = (pending == 0);
        if
        :: KILLS(snap[0]) || KILLS(snap[1]) ->
            printf("MSC: child's enqueue commits: born ended\n");
            end_child()
        :: else ->
            child = WAITING;
            printf("MSC: child's enqueue commits: waiting, pending %d\n", pending);
            if
            :: pending == 0 -> release_child()
            :: else -> skip
            fi
        fi;
        p = 0; snap[0] = 0; snap[1] = 0
    }
}

proctype Verifier()
{
    byte p, todo, found;

    child != NOT_YET;                   /* the leader sees only committed children */
    /* 1. the unverified child's unresolved edges */
    atomic {
        if
        :: !verified ->
            if :: edge[0] == UNRESOLVED -> todo = todo | 1 :: else -> skip fi;
            if :: edge[1] == UNRESOLVED -> todo = todo | 2 :: else -> skip fi
        :: else -> skip
        fi
    };
    /* 2. per edge: wait for the parent's ender, then a new statement */
    do
    :: p < NP ->
        if
        :: todo & (1 << p) ->
#ifndef VERIFIER_NOLOCK
            !xlock[p];                  /* shared lock taken and dropped */
#endif
            atomic {
                if
                :: pstate[p] != OPEN -> found = found | (1 << p)
                :: else ->
                    if
                    :: xlock[p] ->
                        printf("MSC: verifier reads parent %d open while its closer has not committed\n", p)
                    :: else ->
                        printf("MSC: verifier reads parent %d open: its closer will see the edge\n", p)
                    fi
                fi
            }
        :: else -> skip
        fi;
        p++
    :: else -> break
    od;
    /* 3. resolve the ends it found, verified, commit */
    atomic {
        if :: found & 1 -> resolve(0, VERIFIER) :: else -> skip fi;
        if :: found & 2 -> resolve(1, VERIFIER) :: else -> skip fi;
        verified = true;
        p = 0; todo = 0; found = 0
    }
}

init
{
    byte p;
    atomic {
        if :: policy = CANCEL :: policy = RUN fi;
        if :: pend[0] = COMPLETED :: pend[0] = FAILED fi;
        if :: pend[1] = COMPLETED :: pend[1] = FAILED fi;
        run Closer(0); run Closer(1); run Child();
#ifndef NO_VERIFIER
        run Verifier()
#endif
    };
    /* every other process has ended */
    _nr_pr == 1 ->
    atomic {
        if
        :: child == WAITING ->
            printf("MSC: child still waiting, pending %d, after every process ended\n", pending);
            child_stuck = true
        :: else -> skip
        fi;
        assert(!child_stuck);
        if
        :: (child == AVAILABLE) != !(KILLS(pend[0]) || KILLS(pend[1])) ->
            printf("MSC: child's outcome %d does not match the parents' ends\n", child);
            wrong_outcome = true
        :: else -> skip
        fi;
        assert(!wrong_outcome);
        assert(n_release + n_end == 1);
        p = 0;
        do
        :: p < NP ->
            if
            :: edge[p] == UNRESOLVED ->
                printf("MSC: edge of parent %d is still unresolved\n", p);
                unresolved_edge = true
            :: else -> skip
            fi;
            p++
        :: else -> break
        od;
        assert(!unresolved_edge);
#ifndef NO_VERIFIER
        assert(verified);
#endif
        p = 0
    }
}
