"""The producer: a thread that enqueues through the SQL API (insert_job_compat) at a fixed
rate and records what became of every insert, for the ledger."""

import json
import os
import re
import select
import subprocess
import threading
import time
import uuid

from .common import QUEUE, sql


class Producer(threading.Thread):
    """One psql session, one insert_job_compat per transaction (autocommit), with a marker
    in args. A job counts as acknowledged when its id came back; a statement that got no
    answer (timeout, lost session) is unknown and counts as committed if its marker is
    found in the schema."""

    def __init__(self, url, schema, rate, kinds, logdir):
        super().__init__(daemon=True)
        self.url, self.schema, self.rate, self.kinds = url, schema, rate, kinds
        self.errpath = os.path.join(logdir, "producer.stderr")
        self.phase = "A"
        self.records = []  # [marker, phase, kind, keyed, job_id or None, outcome]
        self.stop_event = threading.Event()
        self.proc = None
        self.buf = b""
        self.seq = 0
        self.run_id = uuid.uuid4().hex[:8]

    def start_psql(self):
        env = dict(os.environ, PGOPTIONS="-c statement_timeout=30000")
        self.errf = open(self.errpath, "a")
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=0", "-d", self.url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf, env=env)
        self.buf = b""

    def kill_psql(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def read_until(self, end, timeout):
        lines = []
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text == end:
                    return lines
                lines.append(text)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self.buf += chunk

    def job(self):
        self.seq += 1
        marker = f"{self.run_id}-{self.seq}"
        n = self.seq % 10
        keyed = n in (1, 2)
        if n == 9:
            if "flaky" in self.kinds:
                kind, args, attempts = "flaky", {"fail_attempts": 1, "retry_ms": 200}, 3
            else:
                kind, args, attempts = "fail", {"mode": "retryable"}, 2
        else:
            kind, args, attempts = "noop", {}, 3
        args = dict(args, m=marker, phase=self.phase)
        okey = f", p_ordering_key => convert_to('key-{self.seq % 8}', 'UTF8')" if keyed else ""
        text = sql("producer_insert", schema=self.schema, marker=marker, kind=kind,
                   queue=QUEUE, args=json.dumps(args), attempts=attempts, ordering_key=okey)
        return marker, kind, keyed, text

    def run(self):
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if self.proc is None or self.proc.poll() is not None:
                self.start_psql()
            marker, kind, keyed, text = self.job()
            rec = [marker, self.phase, kind, keyed, None, "error"]
            try:
                self.proc.stdin.write(text.encode())
                self.proc.stdin.flush()
                lines = self.read_until(f"end|{marker}", 40)
            except (BrokenPipeError, OSError):
                lines = None
            if lines is None:
                rec[5] = "unknown"
                self.kill_psql()
            else:
                for ln in lines:
                    parts = ln.split("|")
                    if len(parts) >= 3 and parts[0] == "ack" and parts[1] == marker:
                        rec[4], rec[5] = int(parts[2]), "acked"
            self.records.append(rec)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)
            else:
                next_at = time.monotonic()
        self.kill_psql()

    def stop(self, timeout=60):
        self.stop_event.set()
        self.join(timeout)
        if self.is_alive():
            self.kill_psql()
            self.join(10)

    def errors_sample(self):
        try:
            with open(self.errpath, errors="replace") as f:
                lines = [ln.strip() for ln in f if ln.strip()]
        except OSError:
            return []
        seen = []
        for ln in lines:
            key = re.sub(r"\d+", "N", ln)
            if key not in [re.sub(r"\d+", "N", s) for s in seen]:
                seen.append(ln)
        return seen[:8]
