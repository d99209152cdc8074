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
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the bench's MCP client, Jupyter client and /proc helpers)
import targets  # noqa: E402
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


# ------------------------------------------------------------------ N agents at once
#
# jupyter_client is not thread-safe, so N kernels driven from threads of one
# process hang.  Each agent instead gets a driver process of its own
# (this file, run with --scale-agent): it starts one server or one kernel,
# reports "ready PID" on stdout, waits for "go" on stdin, loops over the
# suite until its deadline (each wait bounded by --task-timeout), and
# reports its latencies as one JSON line.  Both sides are driven the same
# way, so the drivers' own cost is outside both measurements; the parent
# only samples /proc.

# What the server's processes call themselves (setproctitle), and Jupyter's
# kernel; "exited" is children that have ended and wait to be reaped (their
# CPU is still in their stat file), "reaped" the CPU of children that a
# process of the tree waited for during the window (old checkpoints, savers,
# warm-up probes).
CATEGORIES = ("server", "zygote", "warm-up", "session", "checkpoint", "saver", "kernel", "exited", "other")
CPU_COLUMNS = CATEGORIES + ("reaped",)


def scale_agent(a):
    """One agent's driver process (--scale-agent server|jupyter)."""
    kind, root = a.scale_agent, a.root
    out = sys.stdout
    actor = None
    try:
        if kind == "server":
            actor = run.Server(a.server, root, skill=a.skill, stderr_path=os.path.join(root, "server.log"))
            actor.initialize()
            actor.execute("import pandas", timeout=a.task_timeout)
            pid = actor.pid
        else:
            pyenv = json.loads(a.pyenv)
            actor = run.Kernel(dict(pyenv, PWD=root))
            actor.execute("import os, pandas; os.chdir(%r)" % root, timeout=a.task_timeout)
            actor.drain()
            pid = actor.km.provisioner.process.pid
    except Exception as e:  # noqa: BLE001 (reported to the parent)
        out.write("failed %s\n" % json.dumps("%s: %s" % (type(e).__name__, str(e)[:300])))
        out.flush()
        if actor:
            actor.close()
        return 1
    out.write("ready %d\n" % pid)
    out.flush()
    go = sys.stdin.readline()
    lat, errors, hung, done_in_window = [], [], "", 0
    if go.strip() == "go":
        stop = run.now() + a.seconds
        i = a.offset
        while run.now() < stop:
            code = TASKS[i % len(TASKS)][1]
            i += 1
            t0 = run.now()
            try:
                if kind == "server":
                    actor.execute(code, timeout_s=a.task_timeout, timeout=a.task_timeout + 10)
                else:
                    actor.execute(code, timeout=a.task_timeout)
                    actor.drain()
            except Exception as e:  # noqa: BLE001 (counted and reported)
                msg = "%s: %s" % (type(e).__name__, str(e)[:300])
                if isinstance(e, run.ServerError) and "deadline" in str(e) or \
                        type(e).__name__ == "Empty":
                    hung = "no reply within %.0f s (task %r)" % (a.task_timeout, TASKS[(i - 1) % len(TASKS)][0])
                    break  # the actor is still busy: nothing more to ask it
                errors.append(msg)
                if isinstance(e, run.ServerError) and "closed stdout" in str(e):
                    hung = msg
                    break
                continue
            t1 = run.now()
            lat.append(t1 - t0)
            if t1 <= stop:
                done_in_window += 1
    else:
        hung = "no go from the parent"
    out.write("result %s\n" % json.dumps({"lat": lat, "in_window": done_in_window, "errors": errors,
                                         "hung": hung}))
    out.flush()
    try:
        actor.close()
    except Exception:  # noqa: BLE001
        pass
    return 0


def categorize(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        if st[st.rindex(")") + 2] == "Z":
            return "exited"
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cl = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if cl.startswith("python-sandbox-mcp: ") or cl.startswith("-python-sandbox-mcp: "):
        w = cl.split(": ", 1)[1].split()
        return w[0] if w and w[0] in CATEGORIES else "other"
    if "python-sandbox-mcp" in cl.split(" ", 1)[0]:
        return "server"
    if "ipykernel" in cl:
        return "kernel"
    return "other"


def tree(roots):
    kids = run.proc_children_map()
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0


def cpu_idle_total():
    with open("/proc/stat") as f:
        x = [int(v) for v in f.readline().split()[1:]]
    return x[3] + x[4], sum(x[:8])


def mem_available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Agent:
    def __init__(self, argv, env, idx):
        self.idx = idx
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, bufsize=0, start_new_session=True)
        self.buf = b""
        self.pid = None      # the server's or the kernel's pid
        self.failed = ""
        self.result = None

    def lines(self):
        """Reads what is there; returns the complete lines."""
        try:
            chunk = os.read(self.p.stdout.fileno(), 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            out.append(line.decode(errors="replace"))
        return out, not chunk

    def kill(self):
        """The driver and what it started (the server's or kernel's tree)."""
        pids = tree([self.p.pid] + ([self.pid] if self.pid else []))
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def window_end(roots, ticks0, idle0, tot0):
    """The machine's CPU busy fraction since (idle0, tot0), and the CPU ticks
    and minor faults of the agents' processes since ticks0, by kind."""
    idle1, tot1 = cpu_idle_total()
    busy = 1.0 - (idle1 - idle0) / max(1, tot1 - tot0)
    cpu_by, flt_by = {}, {}
    for p in tree(roots):
        v = run.proc_ticks(p)
        if not v:
            continue
        b = ticks0.get(p) or (0, 0, 0, 0)
        c = categorize(p)
        cpu_by[c] = cpu_by.get(c, 0) + v[0] - b[0]
        cpu_by["reaped"] = cpu_by.get("reaped", 0) + v[1] - b[1]
        flt_by[c] = flt_by.get(c, 0) + v[2] - b[2]
        flt_by["reaped"] = flt_by.get("reaped", 0) + v[3] - b[3]
    return busy, cpu_by, flt_by


def scale_side(kind, n, a, work, pyenv):
    """n agents of one kind at once; returns the measurements."""
    log = run.log
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
               XDG_STATE_HOME=os.path.join(work, "state"))
    agents, pending, t_start = [], list(range(n)), run.now()
    starting = []
    ready_deadline = run.now() + a.scale_ready_timeout
    # Start at most a few at a time: n kernels or zygotes importing pandas
    # at once on two cores only slows each start past its own timeout.
    while (pending or starting) and run.now() < ready_deadline:
        while pending and len(starting) < a.scale_start_parallel:
            i = pending.pop(0)
            root = os.path.join(work, "scale-%s-%d-%d" % (kind, n, i))
            shutil.copytree(os.path.join(work, "project"), root)
            skill = []
            if kind == "server" and a.scale_skill:
                # A policy asking for more than the built-in one is approved
                # for this project in the run's own configuration directory.
                skill = ["--skill", os.path.abspath(a.scale_skill)]
                subprocess.run([os.path.abspath(a.server), "--trust", "--yes", "--root", root] + skill,
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            argv = [PY, os.path.abspath(__file__), "--scale-agent", kind, "--root", root,
                    "--server", os.path.abspath(a.server), "--seconds", str(a.scale_seconds),
                    "--offset", str(i * 7), "--task-timeout", str(a.task_timeout),
                    "--pyenv", json.dumps(pyenv)] + (["--skill"] + skill[1:] if skill else [])
            ag = Agent(argv, env, i)
            agents.append(ag)
            starting.append(ag)
        r, _, _ = select.select([ag.p.stdout for ag in starting], [], [], 1.0)
        for f in r:
            ag = next(x for x in starting if x.p.stdout is f)
            lines, eof = ag.lines()
            for line in lines:
                if line.startswith("ready "):
                    ag.pid = int(line.split()[1])
                elif line.startswith("failed "):
                    ag.failed = json.loads(line[7:])
            if ag.pid or ag.failed or eof:
                if eof and not (ag.pid or ag.failed):
                    ag.failed = "driver exited (status %s) before it was ready" % ag.p.poll()
                starting.remove(ag)
    for ag in starting + [None] * len(pending):
        if ag:
            ag.failed = "not ready within %.0f s" % a.scale_ready_timeout
    not_started = len(pending)
    live = [ag for ag in agents if ag.pid]
    log("scale: %s, %d agents: %d ready in %.0f s" % (kind, n, len(live), run.now() - t_start))
    # Go: every driver starts its loop now; the parent samples.
    roots = [ag.pid for ag in live]
    pids0 = tree(roots)
    ticks0 = {p: run.proc_ticks(p) for p in pids0}
    idle0, tot0 = cpu_idle_total()
    for ag in live:
        try:
            ag.p.stdin.write(b"go\n")
        except OSError:
            pass
    t_go = run.now()
    stop = t_go + a.scale_seconds
    peak = {"pss": 0, "by": {}, "anon": {}, "priv": {}, "procs": 0, "fds": 0}
    min_avail = mem_available_mb()
    busy = None
    waiting = list(live)
    final_deadline = stop + a.task_timeout + 30
    next_sample = run.now()
    while waiting and run.now() < final_deadline:
        t = run.now()
        if t >= next_sample and (t < stop - 1 or (busy is not None and t < stop + 5)):
            pids = tree(roots)
            by, anon, priv = {}, {}, {}
            fds = 0
            for p in pids:
                c = categorize(p)
                sm = run.smaps_rollup(p)
                by[c] = by.get(c, 0) + (sm.get("Pss") or 0)
                anon[c] = anon.get(c, 0) + (sm.get("Pss_Anon") or 0)
                priv[c] = priv.get(c, 0) + (sm.get("Private_Dirty") or 0) + (sm.get("Private_Clean") or 0)
                fds += fd_count(p)
            total = sum(by.values())
            if total > peak["pss"]:
                peak = {"pss": total, "by": by, "anon": anon, "priv": priv, "procs": len(pids), "fds": fds}
            min_avail = min(min_avail, mem_available_mb())
            next_sample = run.now() + a.scale_sample
        if busy is None and run.now() >= stop:
            busy, cpu_by, flt_by = window_end(roots, ticks0, idle0, tot0)
        # Wake at the window's end: the counters are read before any driver,
        # done with its last task, reports and closes its server or kernel.
        wait = 0.5 if busy is not None else max(0.0, min(0.5, stop - run.now()))
        r, _, _ = select.select([ag.p.stdout for ag in waiting], [], [], wait)
        for f in r:
            ag = next(x for x in waiting if x.p.stdout is f)
            lines, eof = ag.lines()
            for line in lines:
                if line.startswith("result "):
                    ag.result = json.loads(line[7:])
            if ag.result is not None or eof:
                waiting.remove(ag)
    if busy is None:  # every agent ended before the window did
        busy, cpu_by, flt_by = window_end(roots, ticks0, idle0, tot0)
    for ag in waiting:
        ag.failed = "no result within %.0f s after the window (driver hung)" % (a.task_timeout + 30)
    for ag in agents:
        if ag.p.poll() is None and ag.failed:
            ag.kill()  # never ready, or hung: nothing to wait for
        elif ag.p.poll() is None:
            try:
                ag.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                ag.kill()
    lat, in_window, errors, answering, hung = [], 0, [], 0, []
    for ag in agents:
        res = ag.result
        if ag.failed or res is None:
            hung.append("agent %d: %s" % (ag.idx, ag.failed or "no result"))
            continue
        lat += res["lat"]
        in_window += res["in_window"]
        errors += res["errors"]
        if res["hung"]:
            hung.append("agent %d: %s" % (ag.idx, res["hung"]))
        elif res["lat"]:
            answering += 1
    hz = os.sysconf("SC_CLK_TCK")
    return {"n": n, "ready": len(live), "answering": answering, "tasks": in_window,
            "tasks_per_s": in_window / a.scale_seconds, "p50_ms": run.med(lat) * 1000,
            "p95_ms": run.pct(lat, 95) * 1000, "errors": len(errors),
            "first_error": errors[0] if errors else "", "hung": hung,
            "pss_mb": peak["pss"] / 1024.0, "pss_by_mb": {k: v / 1024.0 for k, v in peak["by"].items()},
            "anon_by_mb": {k: v / 1024.0 for k, v in peak["anon"].items()},
            "priv_by_mb": {k: v / 1024.0 for k, v in peak["priv"].items()},
            "procs": peak["procs"], "fds": peak["fds"], "busy": busy, "min_avail_mb": min_avail,
            "cpu_ms_per_task": {k: v * 1000.0 / hz / max(1, in_window) for k, v in cpu_by.items()},
            "minflt_per_task": {k: v / max(1, in_window) for k, v in flt_by.items()},
            "not_started": not_started}


def suite_section(a, root, pyenv, jup, skip):
    """The suite run the five ways; returns the markdown lines."""
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
    if a.targets and "jupyter_reset" in tot:
        targets.record(a.targets, "suite", {
            "tasks": len(TASKS),
            "fresh": {"ours_ms": tot["server_fresh"], "jupyter_ms": tot["jupyter_reset"]},
            "one": {"ours_ms": tot["server_one"], "jupyter_ms": tot["jupyter_one"]}})
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
    return lines


def mb(v):
    return "%.0f MB" % v if v >= 10 else "%.1f MB" % v


def shared_side(n, a, work):
    """What sharing one warm interpreter between agents would give, measured
    with what exists: n agents as n sessions of one server, all forked from
    its one zygote (the design sketch's best case: one copy of the imported
    stack for everyone).  Each session imports pandas and runs three tasks of
    the suite, as an agent of the scale rows would have started; then the
    PSS of the server's whole tree is read.  Returns total PSS in kB."""
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
               XDG_STATE_HOME=os.path.join(work, "state"))
    root = os.path.join(work, "shared-%d" % n)
    shutil.copytree(os.path.join(work, "project"), root)
    # max_sessions: 64 (the built-in policy allows 8), otherwise the built-in policy.
    skill = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "bench",
                         "SKILL-checkpoint-on.md")
    subprocess.run([os.path.abspath(a.server), "--trust", "--yes", "--root", root, "--skill", skill],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    s = run.Server(os.path.abspath(a.server), root, skill=skill,
                   stderr_path=os.path.join(root, "server.log"), env=env)
    try:
        s.initialize()
        for i in range(n):
            s.execute("import pandas", session="a%d" % i, timeout=a.task_timeout)
            for k in range(3):
                s.execute(TASKS[(i * 7 + k) % len(TASKS)][1], session="a%d" % i,
                          timeout_s=a.task_timeout, timeout=a.task_timeout + 10)
        time.sleep(2)  # the last checkpoint and its save
        return sum(run.smaps_rollup(p).get("Pss", 0) for p in [s.pid] + run.descendants(s.pid))
    finally:
        s.close()


def scale_section(a, work, pyenv, jup):
    """N agents at once, ours then Jupyter's, for each N; returns the markdown lines."""
    ns = [int(x) for x in a.scale.split(",") if x]
    kinds = ["server"] + (["jupyter"] if jup else [])
    rows = {}
    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()
    for n in ns:
        for kind in kinds:
            run.log("scale: %d agents, %s" % (n, kind))
            rows[(n, kind)] = scale_side(kind, n, a, work, pyenv)
    label = {"server": "ours", "jupyter": "Jupyter"}
    L = []
    L.append("### Many agents on one machine: each agent loops over the suite for %.0f s" % a.scale_seconds)
    L.append("")
    L.append("%s; nproc %d; %.1f GB of memory; load average before: %s. Ours: one server per agent (its own "
             "project directory, %s), one session; "
             "Jupyter: one kernel per agent. Every agent starts the suite at a different task and runs tasks "
             "back to back; each wait is bounded by %.0f s. PSS: the peak of the sampled sum over all the "
             "agents' processes (every %.0f s); tasks/s: tasks finished inside the window; p95 over every "
             "finished task; CPU busy: the whole machine's, from /proc/stat, over the window." % (
                 started, os.cpu_count(),
                 os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9,
                 " ".join("%.2f" % x for x in load0),
                 "the policy in %s" % os.path.basename(a.scale_skill) if a.scale_skill else
                 "the built-in policy: checkpoints and saved sessions on", a.task_timeout, a.scale_sample))
    L.append("")
    L.append("| agents | side | answering | tasks/s | p50 | p95 | errors | total PSS | PSS per agent |"
             " processes | open fds | CPU busy | CPU per task |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in ns:
        for kind in kinds:
            r = rows[(n, kind)]
            L.append("| %d | %s | %d/%d | %.2f | %s ms | %s ms | %d | %s | %s | %d | %d | %.0f %% | %s ms |" % (
                n, label[kind], r["answering"], n, r["tasks_per_s"], fmt(r["p50_ms"]), fmt(r["p95_ms"]),
                r["errors"], mb(r["pss_mb"]), mb(r["pss_mb"] / n), r["procs"], r["fds"], r["busy"] * 100,
                fmt(sum(r["cpu_ms_per_task"].values()))))
    if jup:
        L.append("")
        L.append("| agents | total PSS ours/Jupyter | tasks/s ours/Jupyter | CPU per task ours/Jupyter |")
        L.append("|---:|---:|---:|---:|")
        for n in ns:
            s, j = rows[(n, "server")], rows[(n, "jupyter")]
            L.append("| %d | %.2f | %.2f | %.2f |" % (
                n, s["pss_mb"] / max(j["pss_mb"], 1e-9), s["tasks_per_s"] / max(j["tasks_per_s"], 1e-9),
                sum(s["cpu_ms_per_task"].values()) / max(sum(j["cpu_ms_per_task"].values()), 1e-9)))
    # Where the memory and the CPU go, per kind of process.
    L.append("")
    L.append("Per agent, by process: PSS at the peak sample (of it anonymous, `Pss_Anon`; private: "
             "`Private_Clean` + `Private_Dirty`, pages no other process maps), then CPU and "
             "minor faults per finished task, counted over the window from /proc/PID/stat (own time; "
             "`reaped` is the children that a process of the tree waited for):")
    L.append("")
    L.append("| agents | side | " + " | ".join(c for c in CPU_COLUMNS) + " |")
    L.append("|---:|---|" + "---:|" * len(CPU_COLUMNS))
    for n in ns:
        for kind in kinds:
            r = rows[(n, kind)]

            def cell(c):
                if c not in r["pss_by_mb"] and c not in r["cpu_ms_per_task"]:
                    return ""
                cpu = "%s ms, %.0f flt" % (fmt(r["cpu_ms_per_task"].get(c, 0)), r["minflt_per_task"].get(c, 0))
                return cpu if c == "reaped" else "%s (anon %s, private %s), %s" % (
                    mb(r["pss_by_mb"].get(c, 0) / n), mb(r["anon_by_mb"].get(c, 0) / n),
                    mb(r["priv_by_mb"].get(c, 0) / n), cpu)
            L.append("| %d | %s | %s |" % (n, label[kind], " | ".join(cell(c) for c in CPU_COLUMNS)))
    L.append("")
    L.append("Where it breaks (first error, agents that did not answer, least memory available):")
    L.append("")
    for n in ns:
        for kind in kinds:
            r = rows[(n, kind)]
            bits = ["MemAvailable at least %.1f GB" % (r["min_avail_mb"] / 1024)]
            if r["errors"]:
                bits.append("%d failed tasks, first: %s" % (r["errors"], r["first_error"].replace("\n", " ")[:300]))
            if r["hung"]:
                bits.append("%d not answering, first: %s" % (len(r["hung"]), r["hung"][0][:300]))
            L.append("- %d, %s: %s" % (n, label[kind], "; ".join(bits)))
    # Verdicts against the targets.
    L.append("")
    L.append("| target | measured | target | |")
    L.append("|---|---|---|---|")
    top = max(ns)
    s = rows[(top, "server")]
    j = rows.get((top, "jupyter"))
    ok = s["answering"] == top and not s["hung"]
    L.append("| %d concurrent agents all answering | ours %d/%d answering, %d hung, %d failed tasks%s | 50/50 | %s |" % (
        top, s["answering"], top, len(s["hung"]), s["errors"],
        "; Jupyter %d/%d" % (j["answering"], top) if j else "", "PASS" if ok and top >= 50 else
        ("MISS" if not ok else "n/a (run up to 50)")))
    if j:
        pr = s["pss_mb"] / max(j["pss_mb"], 1e-9)
        worst = max(rows[(n, "server")]["pss_mb"] / max(rows[(n, "jupyter")]["pss_mb"], 1e-9) for n in ns)
        L.append("| total PSS at most a quarter of Jupyter's at the same N | %.2f at N=%d (%s against %s); "
                 "worst over all N %.2f | ≤ 0.25 | %s |" % (pr, top, mb(s["pss_mb"]), mb(j["pss_mb"]), worst,
                                                           "PASS" if worst <= 0.25 else "MISS"))
        tr = s["tasks_per_s"] / max(j["tasks_per_s"], 1e-9)
        if a.targets:
            targets.record(a.targets, "scale", {"n": top, "tasks_ratio": tr, "pss_ratio": pr})
        ok = tr >= 0.8 and s["busy"] >= 0.9
        L.append("| throughput limited by CPU, not our overhead | at N=%d: ours %.2f tasks/s, %.2f× Jupyter's "
                 "(%.2f); CPU busy %.0f %% while ours ran; CPU per task %s ms against %s ms | ≥ 0.8× Jupyter's "
                 "tasks/s with CPU busy ≥ 90 %% | %s |" % (
                     top, s["tasks_per_s"], tr, j["tasks_per_s"], s["busy"] * 100,
                     fmt(sum(s["cpu_ms_per_task"].values())), fmt(sum(j["cpu_ms_per_task"].values())),
                     "PASS" if ok else "MISS"))
    if "shared" not in a.skip and j:
        # What the sketch below would give at best, measured: every agent a
        # session of one server, so one zygote's imported stack for all.
        L.append("")
        L.append("The same agents as sessions of one server (one zygote shared by all, the best case of "
                 "sharing the warm interpreter): each session imports pandas and runs three tasks of the "
                 "suite, one session after the other, then the PSS of the server's tree is read.")
        L.append("")
        L.append("| agents | one server, N sessions: total PSS | per agent | N servers (above): per agent "
                 "| N kernels: per agent | one server / Jupyter |")
        L.append("|---:|---:|---:|---:|---:|---:|")
        for n in ns:
            run.log("scale: %d agents as sessions of one server" % n)
            try:
                kb = shared_side(n, a, work)
            except Exception as e:  # noqa: BLE001 (reported in the table)
                L.append("| %d | failed: %s | | | | |" % (n, str(e)[:200].replace("|", "/")))
                continue
            tot = kb / 1024.0
            L.append("| %d | %s | %s | %s | %s | %.2f |" % (
                n, mb(tot), mb(tot / n), mb(rows[(n, "server")]["pss_mb"] / n),
                mb(rows[(n, "jupyter")]["pss_mb"] / n), tot / max(rows[(n, "jupyter")]["pss_mb"], 1e-9)))
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated: suite,jupyter,python3,scale,shared")
    ap.add_argument("--scale", default="1,5,10,25,50", help="numbers of concurrent agents")
    ap.add_argument("--scale-seconds", type=float, default=20.0, help="each side's window per N")
    ap.add_argument("--scale-sample", type=float, default=2.0, help="seconds between PSS samples")
    ap.add_argument("--scale-start-parallel", type=int, default=6,
                    help="agents starting at once (each imports pandas)")
    ap.add_argument("--scale-ready-timeout", type=float, default=300.0)
    ap.add_argument("--task-timeout", type=float, default=120.0,
                    help="the longest wait for one task's reply (also the cell's timeout_s)")
    ap.add_argument("--scale-skill", help="run our servers under this SKILL.md (approved in the run's own "
                    "configuration directory), e.g. fixtures/bench/SKILL-checkpoint-off.md")
    ap.add_argument("--results", help="append the tables (markdown) to this file")
    ap.add_argument("--targets", help="record the suite's and the scale rows' ratios in this JSON file "
                    "(bench/targets.py)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: the first 6 tasks, one round, no scale rows")
    # One agent's driver process (started by the scale rows, not by hand).
    ap.add_argument("--scale-agent", choices=("server", "jupyter"), help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--pyenv", help=argparse.SUPPRESS)
    ap.add_argument("--skill", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.scale_agent:
        return scale_agent(a)
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
    lines = []
    try:
        if "suite" not in skip:
            lines += suite_section(a, root, pyenv, jup, skip)
        if "scale" not in skip:
            if lines:
                lines.append("")
            lines += scale_section(a, work, pyenv, jup)
    finally:
        text = "\n".join(lines) + "\n"
        print(text)
        if a.results and lines:
            with open(a.results, "a") as f:
                f.write("\n" + text)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
