"""What every part of the rehearsal shares: paths, errors, logging, short commands and the
loader of the SQL texts in sql/."""

import functools
import os
import re
import subprocess
import time

# scripts/lib/rehearsal/common.py -> the repository. Kept as abspath (not realpath), as the
# script always computed it: the new build's folder is named after a hash of this path, so
# a different spelling would rebuild from scratch.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TMP = os.environ.get("TMPDIR") or "/tmp"
QUEUE = "rehearsal"
TERMINAL = "('completed', 'failed', 'cancelled', 'dlq')"
SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")


class SetupError(Exception):
    pass


class Interrupted(Exception):
    pass


def log(msg):
    print(f"[rehearsal {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, timeout, cwd=None, env=None, check=True):
    """Runs a short command; returns (rc, stdout + stderr)."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SetupError(f"timed out after {timeout} s: {' '.join(cmd)}")
    out = (p.stdout or "") + (p.stderr or "")
    if check and p.returncode != 0:
        raise SetupError(f"{' '.join(cmd)} failed ({p.returncode}):\n{out.strip()}")
    return p.returncode, out


def git(*args, timeout=120, check=True):
    return run(["git", "-C", ROOT, *args], timeout, check=check)[1].strip()


def condense(text):
    """A command's output on one line: its first and last lines when it has many."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) <= 3:
        return " | ".join(lines)
    return f"{lines[0]} | ... ({len(lines) - 2} more lines) | {lines[-1]}"


def tail(text, n):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


@functools.lru_cache(maxsize=None)
def _sql_text(name):
    with open(os.path.join(SQL_DIR, name + ".sql")) as f:
        lines = f.read().splitlines(keepends=True)
    # The header comment (what the text computes, its parameters) is for the reader; the
    # producer sends its statement per job, so the header is not sent along.
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def sql(name, **params):
    """The text of sql/NAME.sql with each {param} replaced. Every parameter is an identifier
    or a fragment this program makes (schema names, markers, the terminal states), never
    input from outside. A placeholder without a value, or a value without a placeholder, is
    an error, so a text and its caller cannot drift apart silently."""
    text = _sql_text(name)
    used = set()

    def fill(m):
        used.add(m.group(1))
        return str(params[m.group(1)])

    out = _PLACEHOLDER.sub(fill, text)
    unused = set(params) - used
    if unused:
        raise KeyError(f"sql/{name}.sql has no placeholder for {sorted(unused)}")
    return out
