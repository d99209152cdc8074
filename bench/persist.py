#!/usr/bin/python3
"""make bench-persist: what saving and restoring a session costs.

For each state (a 100 MB DataFrame, a 1 GiB numpy array, 10,000 small
objects, and all three in one session) it measures, on the real server:
- build: the cell that makes the state, in a warm server (what an agent
  re-runs without saved sessions);
- save: from the reply to the snapshot renamed into place, done in the
  background by a fork of the checkpoint (from the server's log line);
- bytes on disk: workspace/.sessions/default/state.snap;
- restore: the first call after a restart (the server streams the snapshot
  to the session, which loads it, then runs `1`), against the same first
  call in a session with nothing saved (both include the interpreter's
  warm-up after a start: the difference is the restore).
Prints a table and writes bench/PERSIST.md.  Not part of `make test`.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import Server, now  # noqa: E402

SKILL = """---
name: bench-persist
description: room for a 1 GiB array, saved
limits:
  memory_mb: 8192
  timeout_s: 600
  max_timeout_s: 600
  persist_mb: 4096
---
"""

STATES = {
    "DataFrame, 100 MB": """
import numpy as np, pandas as pd
rng = np.random.default_rng(0)
n = 1_250_000
df = pd.DataFrame({f"x{i}": rng.standard_normal(n) for i in range(9)})
df["k"] = rng.integers(0, 1000, n)
int(df.memory_usage(deep=True).sum())
""",
    "numpy array, 1 GiB": """
import numpy as np
big = np.random.default_rng(1).standard_normal(1 << 27)
big.nbytes
""",
    "10,000 small objects": """
small = [{"id": i, "name": f"item{i}", "tags": ("a", "b"), "vals": [i, i * 0.5]} for i in range(10_000)]
len(small)
""",
}
STATES["all three"] = "\n".join(STATES.values())


def wait_saved(path, n, timeout=900.0):
    deadline = now() + timeout
    while now() < deadline:
        with open(path, errors="replace") as f:
            got = re.findall(r"session default: state saved \((\d+) bytes in (\d+) ms\)", f.read())
        if len(got) >= n:
            return int(got[n - 1][0]), float(got[n - 1][1])
        time.sleep(0.2)
    raise RuntimeError("no save logged within %.0f s" % timeout)


def first_call(binary, root, env_log, code="1", session=None):
    s = Server(binary, root, extra=["--log-level", "info"], stderr_path=env_log)
    try:
        s.initialize(timeout=120)
        t0 = now()
        text = s.execute(code, session=session, timeout=900)
        return now() - t0, text
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--results", default=os.path.join(HERE, "PERSIST.md"))
    ap.add_argument("--only", help="one state, by the start of its name")
    a = ap.parse_args()
    binary = os.path.abspath(a.server)
    rows = []
    for name, code in STATES.items():
        if a.only and not name.lower().startswith(a.only.lower()):
            continue
        root = tempfile.mkdtemp(prefix="psm-bench-persist-")
        xdg = tempfile.mkdtemp(prefix="psm-bench-state-")
        os.environ["XDG_STATE_HOME"] = xdg
        # The approval of the policy (its memory and timeout are above the
        # built-in ceiling) goes to a config directory of this run's own.
        os.environ["XDG_CONFIG_HOME"] = xdg
        skill = os.path.join(root, ".agents/skills/code-interpreter-sandbox-executor/SKILL.md")
        os.makedirs(os.path.dirname(skill))
        with open(skill, "w") as f:
            f.write(SKILL)
        log = os.path.join(root, "server.log")
        subprocess.run([binary, "--trust", "--root", root, "--yes"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # A first call with nothing saved: the baseline of a first call.
            base, _ = first_call(binary, root, log, "1", session="baseline")
            s = Server(binary, root, extra=["--log-level", "info"], stderr_path=log)
            s.initialize(timeout=120)
            s.execute("1", session="warm", timeout=300)  # the interpreter is warm: time the cell alone
            t0 = now()
            s.execute(code, timeout=900)
            build = now() - t0
            nbytes, save_ms = wait_saved(log, 1)
            s.close()
            disk = os.path.getsize(os.path.join(root, "workspace/.sessions/default/state.snap"))
            restore, text = first_call(binary, root, log, "1")
            if "state restored" not in text.split("\n")[0]:
                raise RuntimeError("not restored: " + text[:400])
            rows.append((name, build, save_ms / 1000.0, disk, restore, base))
            print("%-22s build %6.2f s  save %6.2f s  %8.1f MB  restore %6.2f s (first call without: %.2f s)" % (
                name, build, save_ms / 1000.0, disk / 1e6, restore, base), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(xdg, ignore_errors=True)
    lines = [
        "# Saved sessions: what they cost",
        "",
        "Made by `make bench-persist` on %s (%d CPUs, shared: absolute times move with the load)." % (
            time.strftime("%Y-%m-%d"), os.cpu_count() or 0),
        "",
        "| state | build (re-run the cell) | save, in the background | on disk | first call after a restart | first call, nothing saved |",
        "|---|---|---|---|---|---|",
    ]
    for name, build, save, disk, restore, base in rows:
        lines.append("| %s | %.2f s | %.2f s | %.1f MB | %.2f s | %.2f s |" % (name, build, save, disk / 1e6, restore, base))
    lines += [
        "",
        "The save runs after the reply, in a fork of the checkpoint, niced, while the agent reads;",
        "a call that comes first abandons it. The restore is paid once, by the first call after a",
        "restart, instead of re-running the cells (the build column, plus whatever produced their",
        "inputs).",
        "",
    ]
    with open(a.results, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
