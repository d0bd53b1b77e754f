"""The outcome of a rehearsal: the report (written as JSON with --json), the verdict, and
the printed table and summary."""

import json


def build_report(reh, a, drain, ledger):
    """The report of a finished rehearsal; also fills each phase's counts and workers into
    reh.phases. report["passed"] is the verdict: lost, double_finalised,
    failed_completions, duplicated and unexpected_ends all 0, and the new build migrated."""
    workers = [w.report() for w in reh.workers]
    failed_completions = sum(w["failed_completion_lines"] for w in workers)
    completion_retries = sum(w["completion_retry_lines"] for w in workers)
    per_phase = ledger["per_phase"]
    totals = {k: sum(p.get(k, 0) for p in per_phase.values())
              for k in ("jobs", "lost", "double_finalised", "produced", "acknowledged",
                        "producer_errors", "producer_unknown", "completed", "failed",
                        "unexpected_ends")}
    for p in ("A", "B", "C"):
        reh.phases[p]["counts"] = per_phase.get(p, {})
        reh.phases[p]["workers"] = [w["name"] for w in workers if w["started_in_phase"] == p]
    report = {
        "old_ref": reh.old_ref, "new_ref": reh.new_ref,
        "old_version": reh.old["version"], "new_version": reh.new["version"],
        "schema": reh.schema, "seconds": a.seconds, "rate": a.rate,
        "jobs": totals["jobs"], "lost": totals["lost"],
        "double_finalised": totals["double_finalised"],
        "failed_completions": failed_completions, "completion_retries": completion_retries,
        "duplicated": ledger["duplicated"], "missing": ledger["missing"],
        "identity_mismatches": ledger["identity_mismatches"],
        "produced": totals["produced"], "acknowledged": totals["acknowledged"],
        "producer_errors": totals["producer_errors"],
        "producer_unknown": totals["producer_unknown"],
        "producer_error_sample": reh.producer.errors_sample() if reh.producer else [],
        "completed": totals["completed"], "failed": totals["failed"],
        "unexpected_ends": totals["unexpected_ends"],
        "upgrade_migrated": reh.migrated,
        "refused": reh.refused,
        "phases": reh.phases, "drain": drain, "workers": workers,
        "lost_sample": ledger["lost_sample"],
        "double_finalised_sample": ledger["double_finalised_sample"],
        "events": reh.events, "logs": reh.rundir,
    }
    ok = (report["lost"] == 0 and report["double_finalised"] == 0 and failed_completions == 0
          and report["duplicated"] == 0 and report["unexpected_ends"] == 0 and reh.migrated)
    report["passed"] = ok
    return report


def table(report):
    phases = report["phases"]
    cols = ["produced", "acknowledged", "producer_errors", "jobs", "completed", "failed",
            "lost", "double_finalised", "unexpected_ends"]
    head = f"{'phase':<6}" + "".join(f"{c:>{len(c) + 2}}" for c in cols)
    lines = [head, "-" * len(head)]
    for p in ("A", "B", "C"):
        c = phases.get(p, {}).get("counts", {})
        lines.append(f"{p:<6}" + "".join(f"{c.get(k, 0):>{len(k) + 2}}" for k in cols))
    return "\n".join(lines)


def print_summary(report, reh):
    drain, workers = report["drain"], report["workers"]
    failed_completions = report["failed_completions"]
    print()
    print(f"upgrade rehearsal: {reh.old_ref} -> {reh.new_ref}")
    print(table(report))
    print(f"jobs {report['jobs']}  lost {report['lost']}  double_finalised "
          f"{report['double_finalised']}  failed_completions {failed_completions}  duplicated "
          f"{report['duplicated']}  unexpected_ends {report['unexpected_ends']}  "
          f"drained {drain['drained']} in {drain['seconds']} s")
    print(f"upgrade migrate: {'ok' if reh.migrated else 'FAILED'}; rollback: "
          + ("skipped" if reh.phases["C"].get("skipped") else "old workers only"))
    if reh.refused:
        print("refused:")
        for r in reh.refused:
            print(f"  phase {r['phase']}, {r['binary']} {r['command']}: exit {r['exit_code']}: "
                  f"{r['message']}")
    else:
        print("refused: none")
    for w in workers:
        if w["failed_completion_lines"]:
            print(f"  {w['name']}: {w['failed_completion_lines']} failed completion lines, e.g. "
                  f"{w['failed_completion_sample'][0]}")
        if w["completion_retry_lines"]:
            print(f"  {w['name']}: {w['completion_retry_lines']} completion flushes retried, "
                  f"e.g. {w['completion_retry_sample'][0]}")
    print(f"result: {'PASS' if report['passed'] else 'FAIL'} (worker logs in {reh.rundir})")


def write_json(report, path):
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
