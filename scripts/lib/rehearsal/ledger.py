"""The ledger (the fault harness's definitions, tools/chaos/sql/ledger, on the rehearsal's
schema): every job the producer committed is found exactly once and ends in one terminal
state exactly once. The SQL texts are in sql/."""

from .common import TERMINAL, sql


def ledger_setup(db, lschema, records):
    rows = []
    for marker, phase, kind, keyed, job_id, outcome in records:
        rows.append("\t".join([marker, phase, kind, "t" if keyed else "f",
                               str(job_id) if job_id is not None else "\\N", outcome]))
    db.script(sql("ledger_create", lschema=lschema) + "\n".join(rows) + "\n\\.\n")


def ledger_snapshot(db, schema, lschema):
    """Materialises the schema's attempt ends into lschema.outcomes (the view
    attempt_outcomes, sql/functions/0090_views.sql, with the success expansion first, as
    the fault harness does) and the jobs each marker names into lschema.jobs. A schema from
    before the rings (no claim_closures) keeps every end in done_entries; early rings
    schemas list a closure's lane_seqs as bigint[], later ones as ranges; from migration
    0018 on the lanes key a queue by its id instead of its name."""
    qcol = db.value(sql("queue_key_column", schema=schema))
    lane_seqs = db.value(sql("lane_seqs_type", schema=schema))
    if lane_seqs == "bigint[]":
        expand = sql("expand_lane_seqs_array").rstrip()
    else:
        expand = sql("expand_lane_seqs_ranges").rstrip()
    if lane_seqs:
        outcomes = sql("outcomes_closures", schema=schema, lschema=lschema,
                       expand=expand, qcol=qcol).rstrip()
    else:
        outcomes = sql("outcomes_done_entries", schema=schema).rstrip()
    db.script(sql("snapshot", schema=schema, lschema=lschema, outcomes=outcomes, qcol=qcol))


def pending_jobs(db, schema, lschema):
    ledger_snapshot(db, schema, lschema)
    return int(db.value(sql("pending", lschema=lschema, terminal=TERMINAL)))


def ledger_report(db, schema, lschema):
    ledger_snapshot(db, schema, lschema)
    per_phase = {}
    rows = db.script(sql("per_phase", lschema=lschema, terminal=TERMINAL))
    keys = ["produced", "acknowledged", "producer_errors", "producer_unknown", "jobs",
            "unknown_committed", "completed", "failed", "cancelled", "lost", "double_finalised",
            "unexpected_ends"]
    for r in rows:
        per_phase[r[0]] = dict(zip(keys, (int(x) for x in r[1:])))
    dup = int(db.value(sql("duplicated", lschema=lschema)))
    mismatch = int(db.value(sql("identity_mismatches", lschema=lschema)))
    missing = int(db.value(sql("missing", lschema=lschema)))
    lost_sample = db.script(sql("lost_sample", lschema=lschema, terminal=TERMINAL))
    double_sample = db.script(sql("double_finalised_sample", lschema=lschema,
                                  terminal=TERMINAL))
    return {
        "per_phase": per_phase, "duplicated": dup, "identity_mismatches": mismatch,
        "missing": missing,
        "lost_sample": [{"job_id": r[0], "marker": r[1], "phase": r[2], "kind": r[3],
                         "found": r[4] == "t", "ends": r[5]} for r in lost_sample],
        "double_finalised_sample": [{"job_id": r[0], "ends": r[1]} for r in double_sample],
    }
