"""The database: DATABASE_URL (a local server only), else the project's own (scripts/pg);
and psql, the one client the rehearsal uses."""

import os
import re
import subprocess

from .common import ROOT, SetupError, run


def database_url():
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, "DATABASE_URL"
    run([os.path.join(ROOT, "scripts", "pg"), "start"], 300)
    url = run([os.path.join(ROOT, "scripts", "pg"), "url"], 60)[1].strip().splitlines()[-1]
    return url, "scripts/pg"


def check_local(url):
    m = re.match(r"postgres(?:ql)?://(?:[^@/]*@)?(\[[^\]]*\]|[^:/?]*)", url)
    host = m.group(1) if m else ""
    hm = re.search(r"[?&]host=([^&]*)", url)
    if hm:
        host = hm.group(1)
    if host not in ("", "127.0.0.1", "localhost", "[::1]", "::1") and not host.startswith("/"):
        raise SetupError(f"the database host {host!r} is not local; the rehearsal only runs "
                         "against 127.0.0.1 or a local socket")


class Psql:
    def __init__(self, url):
        self.url = url

    def script(self, sql, timeout=180):
        """Runs a script (ON_ERROR_STOP); returns its tuples as lists of strings."""
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-d", self.url], input=sql, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise SetupError(f"psql failed: {p.stderr.strip()}")
        return [line.split("\t") for line in p.stdout.splitlines() if line != ""]

    def value(self, sql, timeout=60):
        rows = self.script(sql, timeout)
        return rows[0][0] if rows else None
