#!/usr/bin/python3
"""make bench: what the learned warm-up gives and costs (docs/WARMUP.md).

- The first `import scipy.stats, sklearn.linear_model` in a fresh session
  (reset: true, a new fork of the zygote), timed inside the session, with
  --warmup off and once the server has learned those modules.  Target: under
  20 ms once learned.
- Cold start to the first result (spawn -> initialize -> first call) of a
  server whose project has a learned list, against the same with
  --warmup off (what a server did before).  Target: within 1.2x, since the
  learned modules load after the first reply.
- The zygote's PSS before and after it loaded the learned modules, and the
  time it took to load them in the background.

Each server gets its own XDG_STATE_HOME (the learned lists live there), so
the run leaves nothing in the user's own state directory.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import Report, Server, ServerError, descendants, log, med, now, ratio, smaps_rollup  # noqa: E402
import targets  # noqa: E402

IMPORT = "scipy.stats, sklearn.linear_model"
TIMED = ("import time as _t\n_t0 = _t.perf_counter()\nimport %s\n"
         "print(round((_t.perf_counter() - _t0) * 1000, 3))" % IMPORT)


def fresh_import_ms(s):
    """The import, timed inside a brand-new session."""
    r = s.request("tools/call", {"name": "execute_python",
                                 "arguments": {"code": TIMED, "session": "probe", "reset": True}},
                  timeout=300)
    text = r.get("content", [{}])[0].get("text", "")
    if r.get("isError") or not text.startswith("ok"):
        raise ServerError("timed import -> %s" % text[:600])
    m = re.search(r"stdout:\n([0-9.]+)", text)
    if not m:
        raise ServerError("no time in %r" % text[:300])
    return float(m.group(1))


KERNEL = ("import numpy, pandas, matplotlib.pyplot\n" + TIMED)
KERNEL_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1",
              "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def kernel_import_ms():
    """The same import in a fresh python3 that has the stack imported, as a
    kernel has when a notebook's first cell imports it (no jail)."""
    env = dict(KERNEL_ENV, HOME=os.environ.get("HOME", "/root"),
               MPLCONFIGDIR=os.path.join(tempfile.gettempdir(), "psm-bench-mpl"))
    out = subprocess.run(["/usr/bin/python3", "-c", KERNEL], env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def wait_log(path, pattern, timeout=300.0):
    t0 = now()
    rx = re.compile(pattern)
    while now() - t0 < timeout:
        with open(path, "rb") as f:
            m = rx.search(f.read().decode("utf-8", "replace"))
        if m:
            return m
        time.sleep(0.05)
    raise ServerError("no %r in %s after %.0f s" % (pattern, path, timeout))


def zygote_pid(server_pid):
    """The zygote that forks the sessions: of the processes titled zygote
    (with a pid namespace, the one outside it waits for the one inside),
    the one holding the interpreter, so the largest."""
    best, best_pss = None, -1
    for pid in descendants(server_pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b": zygote" not in f.read():
                    continue
        except OSError:
            continue
        pss = smaps_rollup(pid).get("Pss", 0)
        if pss > best_pss:
            best, best_pss = pid, pss
    return best


def total_pss(server_pid):
    """PSS (kB) of every process below the server: zygote, sessions,
    checkpoints."""
    time.sleep(1.0)  # the checkpoints of the last replies
    return sum(smaps_rollup(p).get("Pss", 0) for p in descendants(server_pid))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--results", help="append the table (markdown) here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--targets", help="record the first-import ratio in this JSON file (bench/targets.py)")
    a = ap.parse_args()
    rounds = 3 if a.quick else 10
    server_bin = os.path.abspath(a.server)
    work = tempfile.mkdtemp(prefix="psm-bench-warm-")
    R = Report()
    t_start = now()
    import importlib.util

    missing = [m for m in ("scipy", "sklearn") if importlib.util.find_spec(m) is None]
    if missing:
        print("learned warm-up: not measured: %s not installed (scripts/setup.sh --full installs them)"
              % ", ".join(missing))
        return 0
    root = os.path.join(work, "project")
    os.makedirs(root)
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    err = os.path.join(work, "server.err")

    def start(mode):
        s = Server(server_bin, root, None, extra=["--warmup", mode, "--log-level", "info"], stderr_path=err)
        s.initialize()
        return s

    try:
        # ------------------------------------------ before: nothing learned
        log("warm-up: fresh-session import with --warmup off, and in a plain python3")
        s = start("off")
        s.execute("1+1")
        fresh_import_ms(s)  # page cache
        kernel_import_ms()
        before, kernel = [], []
        for r in range(rounds):  # interleaved: the same load on both
            before.append(fresh_import_ms(s))
            kernel.append(kernel_import_ms())
        s.execute("import %s" % IMPORT, session="second")
        s.execute("1", session="teach")  # the same sessions as below
        pss_off = total_pss(s.pid)
        s.close()
        R.add("before", "warm-up", "fresh session: first `import %s`, --warmup off" % IMPORT, before, scale=1.0)
        R.add("kernel", "warm-up", "alt: the same import in a fresh python3 with numpy, pandas, matplotlib imported "
              "(a kernel's first import)", kernel, scale=1.0)

        # ------------------------------------------ learning
        log("warm-up: learning")
        s = start("on")
        s.execute("1+1")
        zp = zygote_pid(s.pid)
        pss0 = smaps_rollup(zp).get("Pss", 0) if zp else 0
        s.execute("import %s" % IMPORT, session="teach")
        m = wait_log(err, r"warm-up: sklearn\.linear_model loaded in the zygote \((\d+) ms, (\d+) imports, the longest (\d+) ms\)")
        m2 = wait_log(err, r"warm-up: scipy\.stats loaded in the zygote \((\d+) ms, (\d+) imports, the longest (\d+) ms\)")
        load_ms = float(m.group(1)) + float(m2.group(1))
        longest = max(float(m.group(3)), float(m2.group(3)))
        steps = int(m.group(2)) + int(m2.group(2))
        pss1 = smaps_rollup(zp).get("Pss", 0) if zp else 0
        after = [fresh_import_ms(s) for _ in range(rounds)]
        s.execute("import %s" % IMPORT, session="second")
        # The session that taught it holds its own copy: a fresh one.
        s.request("tools/call", {"name": "execute_python",
                                 "arguments": {"code": "1", "session": "teach", "reset": True}}, timeout=120)
        pss_on = total_pss(s.pid)
        s.close()
        R.add("after", "warm-up", "fresh session: first `import %s`, once learned" % IMPORT, after, scale=1.0)
        R.value("load", "warm-up", "the zygote loads both in the background (after the reply)",
                load_ms, "ms", "%d imports, one between requests" % steps)
        R.value("step", "warm-up", "its longest single import (what a session requested meanwhile may wait)",
                longest, "ms")
        if zp:
            R.value("pss", "warm-up", "the zygote's extra PSS with the learned modules", (pss1 - pss0) / 1024.0, "MB",
                    "%.0f MB -> %.0f MB" % (pss0 / 1024.0, pss1 / 1024.0))

        R.value("pss_all", "warm-up", "PSS of the zygote and sessions, two of them with both imported: --warmup off",
                pss_off / 1024.0, "MB")
        R.value("pss_all_on", "warm-up", "the same, learned (the modules shared copy-on-write)", pss_on / 1024.0, "MB")

        # ------------------------------------------ cold start, with a learned list
        log("warm-up: cold start with a learned list and with --warmup off")
        cold_on, cold_off, bare = [], [], []
        mplcfg = os.path.join(work, "mplconfig")
        os.makedirs(mplcfg)
        pyenv = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
                 "MPLBACKEND": "Agg", "MPLCONFIGDIR": mplcfg, "OPENBLAS_NUM_THREADS": "1",
                 "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
        stack = ["/usr/bin/python3", "-c", "import numpy, pandas, matplotlib.pyplot; print(1+1)"]
        subprocess.run(stack, env=pyenv, check=True, stdout=subprocess.DEVNULL)
        for mode in ("on", "off"):  # page cache, font cache
            s = start(mode)
            s.execute("1+1")
            s.close()
        for r in range(rounds):
            pair = (("on", cold_on), ("off", cold_off))
            for mode, xs in pair if r % 2 == 0 else pair[::-1]:  # neither always first
                s = Server(server_bin, root, None, extra=["--warmup", mode], stderr_path=err)
                s.initialize()
                s.execute("1+1", timeout=120)
                xs.append(now() - s.t_spawn)
                s.close()
            t0 = now()
            subprocess.run(stack, env=pyenv, check=True, stdout=subprocess.DEVNULL)
            bare.append(now() - t0)
        R.add("cold_on", "warm-up", "cold start → first result of `1+1`, a learned list present", cold_on)
        R.add("cold_off", "warm-up", "cold start → first result of `1+1`, --warmup off", cold_off)
        R.add("bare", "warm-up", "alt: `python3 -c 'import numpy, pandas, matplotlib.pyplot; print(1+1)'`", bare)

        md_after, md_before = med(after), med(before)
        rk = ratio(md_before, med(kernel))
        if a.targets and rk:
            targets.record(a.targets, "first_import", {"modules": IMPORT, "ratio": rk, "ours_ms": md_before,
                                                       "kernel_ms": med(kernel)})
        R.target("fresh session's first `import %s`, nothing learned, vs a fresh kernel's" % IMPORT,
                 "%.2f×" % rk if rk else "-", "≤ 1.10×", None if rk is None else rk <= 1.1)
        R.value("speedup", "warm-up", "fresh-session import: off / learned", ratio(md_before, md_after) or 0, "x")
        R.target("fresh session's first `import %s` once learned" % IMPORT, "%.2f ms" % md_after, "< 20 ms",
                 md_after < 20.0)
        rc = ratio(R.m("cold_on"), R.m("cold_off"))
        R.target("cold start to the first result, learned list vs --warmup off",
                 "%.2f×" % rc if rc else "-", "≤ 1.20×", None if rc is None else rc <= 1.2)
        rb = ratio(R.m("cold_on"), R.m("bare"))
        R.target("cold start to the first result with a learned list, vs the bare import of the stack",
                 "%.2f×" % rb if rb else "-", "≤ 1.20×", None if rb is None else rb <= 1.2)
    except (ServerError, OSError, subprocess.CalledProcessError) as e:
        R.fail("learned warm-up", e)
    header = "## Learned warm-up\n\n%s, %d rounds, %.0f s (bench/warmup.py)" % (
        time.strftime("%Y-%m-%d %H:%M:%S %Z"), rounds, now() - t_start)
    table = R.render(header)
    print(table, flush=True)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + table + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
