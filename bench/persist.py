#!/usr/bin/python3
"""make bench-persist: what saving, restoring and forking a session cost.

For each state (a 10 MB numpy array, a 100 MB DataFrame, a 1 GiB numpy
array, and 10,000 small objects) it measures, on the real server:
- build: the cell that makes the state, in a warm server (what an agent
  re-runs without saved sessions);
- save: from the reply to the snapshot renamed into place, done in the
  background by a fork of the checkpoint (the server's log line);
- on disk: workspace/.sessions/default/state.snap (and, for a state in
  pieces, the pieces file it names);
- read: the time `cat` takes to read that file, from the page cache (warm)
  and from the disk (cold: the file's pages dropped with
  posix_fadvise(DONTNEED), nothing else's);
- restore: the first call after a restart (the server streams the snapshot
  to the session, which loads it, then runs `1`), less the first call of a
  session with nothing saved in the same warm server, warm and cold (each
  cold one right after a cold read of the file, so that the ratio of the
  two is taken under the same load: the median of those ratios is shown);
- fork: a call with fork_from (the copy, then `1` in it), less a call `1`
  in the parent, and the copy alone as the server logs it.
Prints a table with the ratios the targets are about (restore over cold
read: at most 1.5; restore over build: below 1) and writes bench/PERSIST.md.
Not part of `make test`.
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
    "numpy array, 10 MB": """
import numpy as np
a10 = np.random.default_rng(2).standard_normal(1_310_720)
a10.nbytes
""",
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


def logged(path, pattern, n=1, timeout=900.0):
    deadline = now() + timeout
    while now() < deadline:
        with open(path, errors="replace") as f:
            got = re.findall(pattern, f.read())
        if len(got) >= n:
            return got[n - 1]
        time.sleep(0.1)
    raise RuntimeError("%r not logged within %.0f s" % (pattern, timeout))


def snap_files(snap):
    """The snapshot's files: state.snap, and the pieces it names when the
    state was saved in pieces (docs/PERSISTENCE.md)."""
    d = os.path.dirname(snap)
    return [snap] + sorted(os.path.join(d, n) for n in os.listdir(d) if re.fullmatch(r"pieces\.\d+", n))


def drop(snap):
    """Evicts the snapshot's files from the page cache (their pages are clean)."""
    for path in snap_files(snap):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cat_s(snap):
    t0 = now()
    subprocess.run(["cat"] + snap_files(snap), stdout=subprocess.DEVNULL, check=True)
    return now() - t0


def timed(s, code, **kw):
    t0 = now()
    text = s.execute(code, timeout=900, **kw)
    return now() - t0, text


def restore_once(binary, root, log, snap, cold):
    """The first call to `default` after a restart, less a first call to a
    session with nothing saved; the snapshot dropped first when cold."""
    s = Server(binary, root, extra=["--log-level", "info"], stderr_path=log)
    try:
        s.initialize(timeout=120)
        s.execute("1", session="warm", timeout=300)
        base, _ = timed(s, "1", session="empty")
        if cold:
            drop(snap)
        else:
            cat_s(snap)
        t, text = timed(s, "1")
        if "state restored" not in text.split("\n")[0]:
            raise RuntimeError("not restored: " + text[:400])
        return t - base, s
    except BaseException:
        s.close()
        raise


def restore_closed(binary, root, log, snap, cold):
    t, s = restore_once(binary, root, log, snap, cold)
    s.close()
    return t


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def med_of(n, f):
    return med([f() for _ in range(max(n, 1))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--reps", type=int, default=3, help="runs of each read and restore (the median is shown)")
    ap.add_argument("--results", default=os.path.join(HERE, "PERSIST.md"))
    ap.add_argument("--only", help="one state, by the start of its name")
    a = ap.parse_args()
    binary = os.path.abspath(a.server)
    rows, changed = [], []
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
        snap = os.path.join(root, "workspace/.sessions/default/state.snap")
        subprocess.run([binary, "--trust", "--root", root, "--yes"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            s = Server(binary, root, extra=["--log-level", "info"], stderr_path=log)
            s.initialize(timeout=120)
            s.execute("1", session="warm", timeout=300)  # the interpreter is warm: time the cell alone
            build, _ = timed(s, code)
            nbytes, save_ms = logged(log, r"session default: state saved \((\d+) bytes in (\d+) ms")
            if name.startswith("DataFrame"):
                # The save after one column of ten changed: a state in
                # pieces sends and writes only the pieces that changed.
                s.execute('df["x3"] = df["x3"] * 2\n1', timeout=300)
                b2, ms2, w2 = logged(log, r"session default: state saved \((\d+) bytes in (\d+) ms, (\d+) written", n=2)
                changed.append((name, int(b2), float(ms2) / 1000.0, int(w2)))
                print("%-22s one column of ten changed: save %.3f s, %.1f MB written of %.1f MB (%.3f)" % (
                    name, float(ms2) / 1000.0, int(w2) / 1e6, int(b2) / 1e6, int(w2) / int(b2)), flush=True)
            s.close()
            disk = sum(os.path.getsize(f) for f in snap_files(snap))
            # Medians of a.reps runs each: the disk's speed moves a lot on
            # a shared machine, so each cold restore is paired with a cold
            # read just before it, and the ratio is the median of the
            # pairs' ratios (not the ratio of two medians taken minutes
            # apart).
            read_warm = med_of(a.reps, lambda: cat_s(snap))
            restore_warm = med_of(a.reps, lambda: restore_closed(binary, root, log, snap, False))
            reads, restores, ratios = [], [], []
            for _ in range(max(a.reps, 1)):
                drop(snap)
                reads.append(cat_s(snap))
                restores.append(restore_closed(binary, root, log, snap, True))
                ratios.append(restores[-1] / reads[-1] if reads[-1] else 0.0)
            read_cold, restore_cold, ratio = med(reads), med(restores), med(ratios)
            _, s = restore_once(binary, root, log, snap, cold=False)  # a parent to fork
            try:
                call, _ = timed(s, "1")
                try:
                    fork, text = timed(s, "1", session="copy", fork_from="default")
                    if "state forked" not in text.split("\n")[0]:
                        raise RuntimeError("not forked: " + text[:400])
                    copy_ms = float(logged(log, r"session copy: forked from session default \(cell \d+\) in ([\d.]+) ms",
                                           timeout=30))
                except Exception as e:  # a server without fork_from (an older build, for comparison)
                    print("fork_from: %s" % str(e)[:200], flush=True)
                    fork, copy_ms = float("nan") + call, float("nan")
            finally:
                s.close()
            row = (name, build, float(save_ms) / 1000.0, disk, read_warm, read_cold, restore_warm, restore_cold,
                   ratio, fork - call, copy_ms / 1000.0)
            rows.append(row)
            print("%-22s build %6.2f s  save %6.2f s  %8.1f MB  read %5.3f/%5.3f s  restore %5.3f/%5.3f s  "
                  "(cold: %.2fx the read [%s], %.2fx the build)  fork +%.3f s (copy %.1f ms)" % (
                      name, build, row[2], disk / 1e6, read_warm, read_cold, restore_warm, restore_cold,
                      ratio, " ".join("%.2f" % x for x in ratios), restore_cold / build if build else 0,
                      row[9], copy_ms), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(xdg, ignore_errors=True)
    lines = [
        "# Saved sessions: what they cost",
        "",
        "Made by `make bench-persist` on %s (%d CPUs, shared: absolute times move with the load)." % (
            time.strftime("%Y-%m-%d"), os.cpu_count() or 0),
        "",
        "| state | build (re-run the cell) | save, in the background | on disk | read the file, warm / cold | "
        "restore, warm / cold | cold restore / cold read | cold restore / build | fork_from (the call, more than `1`) | the copy alone |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, build, save, disk, rw, rc, sw, sc, ratio, fork, copy) in rows:
        lines.append("| %s | %.2f s | %.2f s | %.1f MB | %.3f / %.3f s | %.3f / %.3f s | %.2f | %.2f | %.0f ms | %.1f ms |" % (
            name, build, save, disk / 1e6, rw, rc, sw, sc, ratio, sc / build if build else 0,
            fork * 1000.0, copy * 1000.0))
    lines += [
        "",
        "Restore is the first call after a restart less the first call of a session with nothing",
        "saved, in the same warm server; cold means the snapshot's pages were dropped from the page",
        "cache first (posix_fadvise DONTNEED), as after a reboot; each cold restore follows a cold read",
        "of the file by `cat`, and the ratio is the median of those pairs' ratios. The save runs after",
        "the reply, in a fork of the checkpoint, niced, while the agent reads. The copy is the fork of",
        "the parent"
        " (reparented to the zygote) until the server has its pidfd; the call adds the copy's hello and",
        "its first checkpoint.",
        "",
    ]
    for (name, b2, s2, w2) in changed:
        lines += [
            "The next save of the %s after one of its ten columns changed (`df[\"x3\"] = df[\"x3\"] * 2`)" % name,
            "took %.3f s and wrote %.1f MB of %.1f MB (%.3f of the state): a state of 16 MiB or more is saved" % (
                s2, w2 / 1e6, b2 / 1e6, w2 / b2),
            "in pieces, and only the pieces that changed are sent and written.",
            "",
        ]
    with open(a.results, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
