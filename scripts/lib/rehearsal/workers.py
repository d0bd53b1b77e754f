"""The `awa work` processes: started in a session of their own with their output in a log
file, stopped with SIGTERM (SIGKILL when they do not stop), and judged by what their logs
say about completions."""

import os
import re
import signal
import subprocess
import time

# Log lines of a completion that failed, in every version of
# src/runtime/completion_batcher.cpp: rows dropped ("completion flush of N rows failed, left
# to rescue", "... still failing with SQLSTATE ... while stopping, left to rescue"), held
# after an error of the server or schema ("... failed with SQLSTATE ..., an error of the
# server or schema"), rejected and bisected ("... rejected, writing it in halves"); and any
# 42725 (an ambiguous function call: a stale overload). A flush that failed once and was
# retried ("completion flush failed (attempt N), retrying") is counted apart, as a retry.
FAILED_COMPLETION = re.compile(
    r"completion flush.*(left to rescue|failed with SQLSTATE|rejected)|42725|is not unique")
RETRIED_COMPLETION = re.compile(r"completion flush failed \(attempt \d+\), retrying")


class Worker:
    def __init__(self, name, binary, which, argv, env, logdir, phase):
        self.name, self.binary, self.which, self.phase_started = name, binary, which, phase
        self.argv = argv
        self.logpath = os.path.join(logdir, name + ".log")
        self.logf = open(self.logpath, "w")
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self.exit_code = None
        self.forced = False
        self.phase_stopped = None

    def wait_running(self, timeout):
        """True once the log says it runs; False if it exited first (or never said so)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self.exit_code = self.proc.returncode
                return False
            if "awa work: running" in self.text():
                return True
            time.sleep(0.2)
        return False

    def text(self):
        # The process writes to the file itself; nothing is buffered on this side.
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def stop(self, timeout, phase):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.forced = True
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.exit_code = self.proc.returncode
        if self.phase_stopped is None:
            self.phase_stopped = phase
        self.logf.close()

    def alive(self):
        return self.proc.poll() is None

    def report(self):
        text = self.text()
        failed = [ln for ln in text.splitlines() if FAILED_COMPLETION.search(ln)]
        retried = [ln for ln in text.splitlines() if RETRIED_COMPLETION.search(ln)]
        errors = [ln for ln in text.splitlines() if "[error]" in ln or "[critical]" in ln]
        summary = [ln for ln in text.splitlines() if ln.startswith("awa work: claimed")]
        return {
            "name": self.name, "binary": self.which, "pid": self.pid,
            "args": [a for a in self.argv[1:]],
            "started_in_phase": self.phase_started, "stopped_in_phase": self.phase_stopped,
            "exit_code": self.exit_code, "killed": self.forced,
            "failed_completion_lines": len(failed), "failed_completion_sample": failed[:5],
            "completion_retry_lines": len(retried), "completion_retry_sample": retried[:3],
            "error_lines": len(errors), "error_sample": errors[:5],
            "summary": summary[-1] if summary else None, "log": self.logpath,
        }
