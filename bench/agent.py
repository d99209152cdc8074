#!/usr/bin/python3
"""make bench-agent: the agent-workload suite (bench/agent_tasks.py) run the
ways an agent could run it, in one process tree, interleaved so that every
way sees the same load:

  server, fresh    each task in a fresh session (execute_python reset: true)
  server, one      all tasks in one session, one after the other
  jupyter, reset   a warm Jupyter kernel, `%reset -f` between tasks
  jupyter, one     all tasks in one warm kernel
  python3 -c       a new python3 process per task

and, with --scale N,N,..., N servers at once, each with one session running
the suite in a loop: tasks per second, p95 task latency and the total PSS of
all their processes, against N Jupyter kernels doing the same.

Prints medians, totals and ratios; nothing here asserts a time.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the bench's MCP client, Jupyter client and /proc helpers)
from agent_tasks import TASKS, make_data  # noqa: E402

PY = "/usr/bin/python3"


def fmt(ms):
    return "%.1f" % ms if ms < 100 else "%.0f" % ms


class Ways:
    """Each way of running one task: a callable code -> seconds."""

    def __init__(self, server_bin, root, pyenv, jupyter):
        self.root = root
        self.pyenv = pyenv
        self.srv = run.Server(server_bin, root, stderr_path=os.path.join(root, "server.log"))
        self.srv.initialize()
        self.srv.execute("1", session="fresh")
        self.srv.execute("1", session="one")
        self.kreset = self.kone = None
        if jupyter:
            self.kreset = run.Kernel(dict(pyenv, PWD=root))
            self.kone = run.Kernel(dict(pyenv, PWD=root))
            for k in (self.kreset, self.kone):
                k.execute("import os; os.chdir(%r)" % root)

    def server_fresh(self, code):
        t0 = run.now()
        r = self.srv.request("tools/call", {"name": "execute_python", "arguments": {
            "code": code, "session": "fresh", "reset": True}}, timeout=300)
        dt = run.now() - t0
        text = r["content"][0]["text"]
        if r.get("isError"):
            raise RuntimeError("server (fresh): " + text[:400])
        return dt

    def server_one(self, code):
        t0 = run.now()
        r = self.srv.request("tools/call", {"name": "execute_python", "arguments": {
            "code": code, "session": "one"}}, timeout=300)
        dt = run.now() - t0
        if r.get("isError"):
            raise RuntimeError("server (one): " + r["content"][0]["text"][:400])
        return dt

    def jupyter_reset(self, code):
        self.kreset.execute("%reset -f")
        self.kreset.drain()
        t0 = run.now()
        self.kreset.execute(code)
        dt = run.now() - t0
        self.kreset.drain()
        return dt

    def jupyter_one(self, code):
        t0 = run.now()
        self.kone.execute(code)
        dt = run.now() - t0
        self.kone.drain()
        return dt

    def python3(self, code):
        t0 = run.now()
        p = subprocess.run([PY, "-c", code], cwd=self.root, env=self.pyenv,
                           capture_output=True, text=True)
        dt = run.now() - t0
        if p.returncode:
            raise RuntimeError("python3 -c: " + p.stderr[-400:])
        return dt

    def close(self):
        self.srv.close()
        for k in (self.kreset, self.kone):
            if k:
                k.close()


def suite(ways, names, rounds):
    """Per way, the list of per-task medians over `rounds` rounds."""
    per = {n: [[] for _ in TASKS] for n in names}
    for r in range(rounds):
        for i, (label, code) in enumerate(TASKS):
            for n in names:
                per[n][i].append(getattr(ways, n)(code))
        run.log("agent suite: round %d of %d done" % (r + 1, rounds))
    return {n: [run.med(x) for x in per[n]] for n in names}


def tree_pss_kb(pids):
    total = 0
    for p in pids:
        for q in [p] + run.descendants(p):
            v = run.smaps_rollup(q).get("Pss")
            total += v or 0
    return total


def scale_row(server_bin, work, pyenv, n, seconds, jupyter):
    """n servers (and n kernels), each looping over the suite for `seconds`."""
    out = {}
    for kind in (["server"] + (["jupyter"] if jupyter else [])):
        actors, pids = [], []
        for i in range(n):
            root = os.path.join(work, "scale-%s-%d-%d" % (kind, n, i))
            os.makedirs(root)
            make_data(root)
            if kind == "server":
                s = run.Server(server_bin, root, stderr_path=os.path.join(root, "server.log"))
                s.initialize()
                s.execute("import pandas")
                actors.append(s)
                pids.append(s.pid)
            else:
                k = run.Kernel(dict(pyenv, PWD=root))
                k.execute("import os, pandas; os.chdir(%r)" % root)
                actors.append(k)
                pids.append(k.km.provisioner.process.pid)
        lat, errors, lock = [], [], threading.Lock()
        stop = run.now() + seconds
        peak = [0]

        def loop(a):
            i = 0
            while run.now() < stop:
                code = TASKS[i % len(TASKS)][1]
                i += 1
                t0 = run.now()
                try:
                    if kind == "server":
                        a.execute(code, timeout=300)
                    else:
                        a.execute(code)
                        a.drain()
                except Exception as e:  # noqa: BLE001 (counted and reported)
                    with lock:
                        errors.append(str(e)[:200])
                    continue
                with lock:
                    lat.append(run.now() - t0)

        def sample():
            while run.now() < stop:
                peak[0] = max(peak[0], tree_pss_kb(pids))
                time.sleep(2)

        ths = [threading.Thread(target=loop, args=(a,)) for a in actors]
        ths.append(threading.Thread(target=sample))
        t0 = run.now()
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        el = run.now() - t0
        for a in actors:
            a.close()
        out[kind] = {"tasks_per_s": len(lat) / el, "p95_ms": run.pct(lat, 95) * 1000,
                     "pss_mb": peak[0] / 1024.0, "errors": len(errors),
                     "first_error": errors[0] if errors else ""}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated: jupyter,python3,scale")
    ap.add_argument("--scale", default="1,5,10", help="numbers of concurrent agents")
    ap.add_argument("--scale-seconds", type=float, default=30.0)
    ap.add_argument("--results", help="append the tables (markdown) to this file")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: the first 6 tasks, one round, no scale rows")
    a = ap.parse_args()
    if a.quick:
        del TASKS[6:]
        a.rounds = 1
        a.skip += ",scale"
    skip = set(x for x in a.skip.split(",") if x)
    jup = "jupyter" not in skip
    if jup:
        try:
            import jupyter_client  # noqa: F401
        except ImportError:
            run.log("jupyter_client missing (make bench-setup): Jupyter rows skipped")
            jup = False
    work = tempfile.mkdtemp(prefix="psm-agent-")
    root = os.path.join(work, "project")
    os.makedirs(root)
    make_data(root)
    mplcfg = os.path.join(work, "mplconfig")
    os.makedirs(mplcfg)
    pyenv = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
             "MPLBACKEND": "Agg", "MPLCONFIGDIR": mplcfg, "OPENBLAS_NUM_THREADS": "1",
             "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
    names = ["server_fresh", "server_one"]
    if jup:
        names += ["jupyter_reset", "jupyter_one"]
    if "python3" not in skip:
        names.append("python3")
    lines = []
    ways = Ways(os.path.abspath(a.server), root, pyenv, jup)
    try:
        for n in names:  # one warm-up pass of each way, not timed
            for _, code in TASKS:
                getattr(ways, n)(code)
        res = suite(ways, names, a.rounds)
    finally:
        ways.close()
    labels = {"server_fresh": "ours, fresh session per task", "server_one": "ours, one session",
              "jupyter_reset": "Jupyter, %reset -f per task", "jupyter_one": "Jupyter, one kernel",
              "python3": "python3 -c per task"}
    lines.append("### Agent workload: %d tasks, median of %d rounds each" % (len(TASKS), a.rounds))
    lines.append("")
    lines.append("| way | whole suite | median task | p95 task |")
    lines.append("|---|---|---|---|")
    tot = {}
    for n in names:
        xs = [x * 1000 for x in res[n]]
        tot[n] = sum(xs)
        lines.append("| %s | %s ms | %s ms | %s ms |" % (labels[n], fmt(tot[n]), fmt(run.med(xs)),
                                                       fmt(run.pct(xs, 95))))
    lines.append("")
    pairs = [("server_fresh", "jupyter_reset"), ("server_one", "jupyter_one"),
             ("server_fresh", "python3")]
    for num, den in pairs:
        if num in tot and den in tot:
            lines.append("- %s against %s: %.2fx the time (whole suite; below 1 is faster)" % (
                labels[num], labels[den], tot[num] / tot[den]))
    lines.append("")
    lines.append("| task | " + " | ".join(labels[n] for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for i, (label, _) in enumerate(TASKS):
        lines.append("| %s | %s |" % (label, " | ".join(fmt(res[n][i] * 1000) for n in names)))
    if "scale" not in skip:
        lines.append("")
        lines.append("### Concurrent agents: each loops over the suite for %.0f s" % a.scale_seconds)
        lines.append("")
        lines.append("| agents | ours: tasks/s | p95 | total PSS | Jupyter: tasks/s | p95 | total PSS |"
                     " PSS ratio |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for n in [int(x) for x in a.scale.split(",") if x]:
            run.log("scale: %d agents" % n)
            r = scale_row(os.path.abspath(a.server), work, pyenv, n, a.scale_seconds, jup)
            s, j = r["server"], r.get("jupyter")
            row = "| %d | %.2f | %s ms | %.0f MB |" % (n, s["tasks_per_s"], fmt(s["p95_ms"]), s["pss_mb"])
            if j:
                row += " %.2f | %s ms | %.0f MB | %.2f |" % (j["tasks_per_s"], fmt(j["p95_ms"]),
                                                          j["pss_mb"], s["pss_mb"] / max(j["pss_mb"], 1))
            else:
                row += " | | | |"
            lines.append(row)
            for kind, v in r.items():
                if v["errors"]:
                    lines.append("  - %s with %d agents: %d failed tasks, first: %s" % (
                        kind, n, v["errors"], v["first_error"]))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
