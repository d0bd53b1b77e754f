"""The two builds: the old release's `awa` in a git worktree, the current tree's in a build
folder of its own, both under ${TMPDIR:-/tmp} and kept between runs; and what each build's
CLI offers."""

import hashlib
import os
import re
import subprocess
import time

from .common import ROOT, TMP, SetupError, git, log, run


def cmake_build(src, bdir, label, timeout):
    """Configures (once) and builds the CLI target of the tree at src into bdir; returns the
    binary. Options are read from that tree's CMakeLists.txt: tests and benchmarks off when
    it has the option, the target is the executable built from cli/main.cpp."""
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        cml = f.read()
    m = re.search(r"add_executable\((\w+)\s+cli/main\.cpp", cml)
    target = m.group(1) if m else "awa_tool"
    opts = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
    for opt in ("AWA_BUILD_TESTS", "AWA_BUILD_BENCH"):
        if re.search(r"option\(\s*" + opt + r"\b", cml):
            opts.append(f"-D{opt}=OFF")
    logf = bdir + ".log"
    os.makedirs(bdir, exist_ok=True)
    start = time.monotonic()
    with open(logf, "a") as out:
        if not os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            log(f"configuring {label}: cmake -S {src} -B {bdir} {' '.join(opts)}")
            rc = subprocess.run(["cmake", "-S", src, "-B", bdir, *opts], stdout=out,
                                stderr=subprocess.STDOUT, timeout=600).returncode
            if rc != 0:
                raise SetupError(f"cmake configure of {label} failed; see {logf}")
        log(f"building {label}: cmake --build {bdir} -j2 --target {target} (log {logf})")
        try:
            rc = subprocess.run(["nice", "cmake", "--build", bdir, "-j2", "--target", target],
                                stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise SetupError(f"build of {label} took over {timeout} s; see {logf}")
    if rc != 0:
        with open(logf) as f:
            last = "".join(f.readlines()[-30:])
        raise SetupError(f"build of {label} failed; see {logf}:\n{last}")
    binary = os.path.join(bdir, "awa")
    if not os.access(binary, os.X_OK):
        raise SetupError(f"build of {label} made no {binary}")
    log(f"{label}: {binary} ({time.monotonic() - start:.0f} s)")
    return binary


def build_old(ref, timeout):
    sha = git("rev-parse", "--verify", ref + "^{commit}")
    short = sha[:12]
    wt = os.path.join(TMP, f"awa-rehearsal-{short}")
    registered = git("worktree", "list", "--porcelain")
    if not os.path.isdir(wt):
        if f"worktree {wt}\n" in registered + "\n":
            git("worktree", "prune")
        log(f"git worktree add --detach {wt} {short}")
        git("worktree", "add", "--detach", wt, sha, timeout=600)
    elif run(["git", "-C", wt, "rev-parse", "HEAD"], 60, check=False)[1].strip() != sha:
        raise SetupError(f"{wt} exists but is not a worktree at {short}; remove it")
    return sha, cmake_build(wt, os.path.join(wt, "build-rehearsal"), f"old {short}", timeout)


def build_new(timeout):
    tag = hashlib.md5(ROOT.encode()).hexdigest()[:12]
    bdir = os.path.join(TMP, f"awa-rehearsal-new-{tag}", "build")
    return cmake_build(ROOT, bdir, "new (current tree)", timeout)


def describe_new(new_bin_given):
    sha = git("rev-parse", "HEAD")[:12]
    if new_bin_given:
        return f"binary {new_bin_given} (checkout at {sha})"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return sha + ("+uncommitted changes" if dirty else "")


def cli_features(binary):
    """What this build's CLI offers: flags of `awa work`, its built-in kinds, its version."""
    _, top = run([binary, "--help"], 30, check=False)
    _, work = run([binary, "work", "--help"], 30, check=False)
    _, ver = run([binary, "version"], 30, check=False)
    m = re.search(r"built-in kinds: ([a-z, ]+)", top + work)
    kinds = {k.strip() for k in m.group(1).split(",")} if m else {"noop"}
    flags = set(re.findall(r"(--[a-z][a-z-]+)", work))
    return {"kinds": kinds, "flags": flags, "version": ver.strip().splitlines()[0] if ver else ""}
