"""One rehearsal's state: its schema and ledger schema, the two builds and what their CLIs
offer, the workers it started, the refusals and events it noted; and the clean-up that
stops whatever it started and drops its schemas. The phases themselves are in
scripts/upgrade-rehearsal."""

import os
import subprocess
import time
import uuid

from .build import cli_features
from .common import QUEUE, TMP, SetupError, log, sql, tail
from .db import Psql
from .workers import Worker


class Rehearsal:
    def __init__(self, a, old_bin, new_bin, url, old_ref, new_ref):
        self.a, self.old_bin, self.new_bin, self.url = a, old_bin, new_bin, url
        self.old_ref, self.new_ref = old_ref, new_ref
        self.schema = "awa_rehearsal_" + uuid.uuid4().hex[:8]
        self.lschema = self.schema + "_ledger"
        self.db = Psql(url)
        self.rundir = os.path.join(TMP, f"awa-rehearsal-run-{self.schema}")
        os.makedirs(self.rundir, exist_ok=True)
        self.env = dict(os.environ, DATABASE_URL=url)
        self.workers = []
        self.refused = []
        self.events = []
        self.phases = {"A": {}, "B": {}, "C": {}}
        self.old = cli_features(old_bin)
        self.new = cli_features(new_bin)
        self.producer = None
        self.phase = "A"
        self.migrated = None

    def note(self, msg, phase=None):
        log(msg)
        self.events.append({"t": time.strftime("%H:%M:%S"), "phase": phase or self.phase,
                            "event": msg})

    def awa(self, binary, args, timeout):
        """A short awa command: (exit code, output). A timeout counts as exit code None."""
        try:
            p = subprocess.run([binary, "--schema", self.schema, *args], env=self.env,
                               capture_output=True, text=True, timeout=timeout)
            return p.returncode, ((p.stdout or "") + (p.stderr or "")).strip()
        except subprocess.TimeoutExpired:
            return None, f"no answer within {timeout} s"

    def worker_argv(self, binary, feats, migrate):
        argv = [binary, "--schema", self.schema, "work", "--queue", f"{QUEUE}:4",
                "--heartbeat-ms", "2000", "--stale-ms", "10000", "--shutdown-timeout-ms", "10000"]
        # Nothing may be pruned before the ledger reads it (as in the fault harness).
        if "--rotate-ms" in feats["flags"]:
            argv += ["--rotate-ms", "0"]
        if not migrate:
            argv.append("--no-migrate")
        return argv

    def start_worker(self, which, n, migrate=True, wait=30):
        binary, feats = (self.old_bin, self.old) if which == "old" else (self.new_bin, self.new)
        name = f"{self.phase}-{which}-{n}" + ("" if migrate else "-no-migrate")
        w = Worker(name, binary, which, self.worker_argv(binary, feats, migrate), self.env,
                   self.rundir, self.phase)
        self.workers.append(w)
        ok = w.wait_running(wait)
        if ok:
            self.note(f"started {which} worker {name} (pid {w.pid})")
        return w, ok

    def stop_worker(self, w):
        w.stop(60, self.phase)
        self.note(f"stopped {w.which} worker {w.name} (pid {w.pid}): exit {w.exit_code}"
                  + (" after SIGKILL" if w.forced else ""))

    def sleep(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            dead = [w for w in self.workers if w.phase_stopped is None and not w.alive()]
            for w in dead:
                w.exit_code = w.proc.returncode
                w.phase_stopped = self.phase
                self.note(f"{w.which} worker {w.name} (pid {w.pid}) exited by itself: "
                          f"{w.exit_code}; last lines: {tail(w.text(), 3)}")

    def set_phase(self, p):
        self.phase = p
        if self.producer:
            self.producer.phase = p
        self.phases.setdefault(p, {})["started"] = time.strftime("%H:%M:%S")

    def cleanup(self, keep):
        if self.producer and self.producer.is_alive():
            self.producer.stop(30)
        for w in self.workers:
            if w.phase_stopped is None or w.alive():
                try:
                    w.stop(30, self.phase)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        if not keep:
            try:
                self.db.script(sql("drop_schemas", schema=self.schema, lschema=self.lschema),
                               300)
                log(f"dropped schemas {self.schema}, {self.lschema}")
            except (SetupError, subprocess.TimeoutExpired) as e:
                log(f"could not drop schema {self.schema}: {e}")
