#!/usr/bin/env python3
"""A producer in another language for the fault harness (docs/reliability.md).

Enqueues through the SQL functions, as a Python service would: psycopg2 (Debian's
python3-psycopg2), one transaction with one to four calls of insert_job_compat (one job)
or insert_jobs_compat (two or three jobs), keyed and unkeyed mixed, with valid but
unusual JSON: big numbers (and, with --huge-numbers, numbers beyond a double's range:
1e400), deep nesting, text outside the Basic Multilingual Plane, both raw and as escaped
surrogate pairs.

Writes one JSON line per job it enqueued (after its COMMIT returned, or with
"commit": "unknown" when the COMMIT itself failed) and one per producer error (a failure
that is not a lost connection or a server shutting down) to --out; the harness merges them
into its ledger. Runs until SIGTERM, then finishes its transaction and exits 0.
"""
import argparse
import json
import random
import signal
import sys
import time

import psycopg2

stop = False


def on_term(_signum, _frame):
    global stop
    stop = True


def caused_by_fault(e):
    code = getattr(e, "pgcode", None)
    if code is None:
        return isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError))
    return code.startswith("08") or code.startswith("57P")


def odd_json(rng, marker, index, seq, huge_numbers):
    """Args as JSON text (the marker fields stay plain) and metadata as JSON text or None."""
    pick = rng.random()
    extra = ""
    meta = None
    if pick < 0.25:
        meta = '{"z": 123456789012345678901234567890, "w": 1.5e300}'
        if huge_numbers:
            meta = '{"x": 1e400, "y": -1e-400, "z": 123456789012345678901234567890}'
    elif pick < 0.45:
        depth = 100 + rng.randrange(100)
        extra = ', "deep": ' + "[" * depth + "1" + "]" * depth
    elif pick < 0.65:
        extra = ', "text": "\U0001F600 \U00010348 caf\u00e9", "escaped": "\\ud83d\\ude00"'
    args = '{"m": %s, "p": %d, "n": %d%s}' % (json.dumps(marker), index, seq, extra)
    return args, meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--out", required=True)
    # Numbers beyond a double's range (1e400) in metadata, as another language's JSON
    # library may send them: jsonb stores them, the worker fails that job alone (its JSON
    # cannot be decoded) and runs the rest of its claim batch. The harness asks for them
    # unless run with --no-huge-numbers.
    ap.add_argument("--huge-numbers", action="store_true")
    o = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    rng = random.Random(o.seed * 1000003 + o.index)
    out = open(o.out, "a", buffering=1)
    conn = None
    seq = 0
    backoff = 0.05
    period = 1.0 / o.rate
    next_at = time.monotonic()
    while not stop:
        if conn is None:
            try:
                conn = psycopg2.connect(o.url, connect_timeout=2)
                backoff = 0.05
            except psycopg2.Error:
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
        jobs = []  # (job dict for the ledger, args text, metadata text, key)
        calls = []
        for _ in range(1 + rng.randrange(4)):
            n = 1 if rng.random() < 0.6 else 2 + rng.randrange(2)
            call = []
            for _ in range(n):
                seq += 1
                marker = "s%d-%d" % (o.index, seq)
                key = "s%d-k%d" % (o.index, rng.randrange(4)) if rng.random() < 0.5 else None
                args, meta = odd_json(rng, marker, o.index, seq, o.huge_numbers)
                job = {"producer": o.index, "seq": seq, "marker": marker, "kind": "noop",
                       "ordering_key": key, "job_id": 0}
                call.append((job, args, meta, key))
                jobs.append(job)
            calls.append(call)
        committing = False
        try:
            cur = conn.cursor()
            for call in calls:
                if len(call) == 1:
                    job, args, meta, key = call[0]
                    cur.execute(
                        "SELECT id FROM awa.insert_job_compat('noop', %s, %s::jsonb, "
                        "p_max_attempts => 5, p_metadata => %s::jsonb, "
                        "p_ordering_key => convert_to(%s, 'UTF8'))",
                        (o.queue, args, meta, key))
                    job["job_id"] = cur.fetchone()[0]
                else:
                    parts = []
                    for job, args, meta, key in call:
                        p = '{"kind": "noop", "queue": %s, "max_attempts": 5, "args": %s' % (
                            json.dumps(o.queue), args)
                        if meta is not None:
                            p += ', "metadata": ' + meta
                        if key is not None:
                            p += ', "ordering_key": ' + json.dumps(key)
                        parts.append(p + "}")
                    cur.execute("SELECT job_id FROM awa.insert_jobs_compat(%s::jsonb) ORDER BY ord",
                                ("[" + ", ".join(parts) + "]",))
                    for (job, _a, _m, _k), row in zip(call, cur.fetchall()):
                        job["job_id"] = row[0]
            committing = True
            conn.commit()
            for job in jobs:
                job["commit"] = "committed"
                out.write(json.dumps(job) + "\n")
        except Exception as e:  # noqa: BLE001 — every failure is sorted below
            if committing:
                for job in jobs:
                    job["commit"] = "unknown"
                    out.write(json.dumps(job) + "\n")
            if not caused_by_fault(e):
                out.write(json.dumps({"error": "%s [%s]" % (str(e).strip().splitlines()[0],
                                                            getattr(e, "pgcode", None))}) + "\n")
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = None
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
            continue
        next_at += period
        now = time.monotonic()
        if next_at < now - 1.0:
            next_at = now
        while not stop and time.monotonic() < next_at:
            time.sleep(min(0.01, max(0.0, next_at - time.monotonic())))
    out.close()
    if conn is not None:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
