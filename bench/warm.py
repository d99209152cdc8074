#!/usr/bin/python3
"""make bench-warm: only the warm `1+1` rows of `make bench`, and their floors.

The same client as bench/run.py (one JSON-RPC line each way over the
server's stdio), against the server with checkpoints on and off and the
canned-reply process (bench/floor_echo.c), in interleaved rounds so that
all three see the same load; back to back and after 100 ms of think time.
Prints medians, p90 and the ratios to the client floor.  Nothing asserts a
time: this is for looking, in a minute, at what one warm call costs.

  make bench-warm                       about 20 s
  make bench-warm WARM_ARGS="--rounds 10 --think-calls 20"
  make bench-warm WARM_ARGS="--files 2000"   a workspace of 2,000 files of a byte
  make bench-warm WARM_ARGS=--phases   and where the server's main thread spends
                                       a call, back to back and after think (perf)
  make bench-warm WARM_ARGS=--dockerrun  every server under build/helpers/dockerrun:
                                       the namespace-free jail without CAP_SYS_PTRACE,
                                       as in a container or for a server not run as
                                       root, where the session's own view of its
                                       descriptors stands in for the server's
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the bench's client and stats)


def task_ns(pid):
    """{tid: CPU ns} of each thread of pid (schedstat's time on the CPU)."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                out[int(t)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def cpu_split(srv):
    """CPU ns so far of the server's main thread, its other threads, its
    session `default` and the rest of its tree (zygote, checkpoints), and
    this client's; for the per-call split (differences of two of these)."""
    r = {"client": task_ns(os.getpid()).get(os.getpid(), 0)}
    main = task_ns(srv.pid)
    r["server main"] = main.pop(srv.pid, 0)
    r["server threads"] = sum(main.values())
    r["session"] = r["zygote, copies"] = 0
    for p in run.descendants(srv.pid):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                key = "session" if b": session default" in f.read() else "zygote, copies"
        except OSError:
            continue
        r[key] += sum(task_ns(p).values())
    return r


def tree_runs(srv):
    """{(pid, tid): how many times it has been put on a CPU so far} for the
    server's threads and every process below it (schedstat's third field):
    what runs between two reads of it woke up."""
    n = {}
    for p in [srv.pid] + run.descendants(srv.pid):
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (p, t)) as f:
                    n[(p, int(t))] = int(f.read().split()[2])
            except (OSError, ValueError, IndexError):
                pass
    return n


def who(srv, pid, tid):
    """A name for a task of the server's tree: the server's main thread or
    another of its threads, or the process's title (session default...)."""
    if pid == srv.pid:
        return "server main thread" if tid == pid else "a server worker thread"
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace").replace("python-sandbox-mcp: ", "")
    except OSError:
        return "pid %d" % pid


# The phases of a warm call in the server's main thread, each by a function
# its samples' stacks go through (the first phase that matches takes the
# sample): what --phases prints, in the order a call meets them.
PHASES = (
    ("reading the request", ("lines_feed",), ("send_exec",)),
    ("before the send: the replay log's view of the session", ("kview_read",), ("replay_log_instead",)),
    ("before the send: the call's CPU and peak counters", ("usage_begin",), ()),
    ("before the send: the output streams' reset", ("outbuf_reset",), ()),
    ("before the send: is the session's copy still there", ("copy_lost_before_call",), ()),
    ("before the send: the rest (the message, SIGCONT)", ("send_exec",), ()),
    ("the result: the call's CPU and peak counters", ("usage_end",), ()),
    ("the freeze: two looks at the session asleep", ("watch_idle",), ()),
    ("the workspace walk", ("scan_submit", "scan_run"), ()),
    ("the freeze: the footprint once stopped", ("final_look", "watch_final"), ()),
    ("the freeze: nothing left below the session", ("watch_quiet",), ()),
    ("after the freeze: the replay log's view and decision", ("replay_log_instead",), ()),
    ("the reply", ("exec_reply",), ()),
    ("waiting (ppoll)", ("ppoll", "__ppoll"), ()),
)


def perf_samples(path):
    """The stacks (function names, leaf first) of `perf script` on path."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,ip,sym"],
                         capture_output=True, text=True).stdout
    stacks, cur = [], []
    for line in out.splitlines():
        if line[:1] in ("\t", " "):
            f = line.split()
            if len(f) >= 2:
                cur.append(f[1])
        else:
            if cur:
                stacks.append(cur)
            cur = []
    if cur:
        stacks.append(cur)
    return stacks


def phase_of(stack):
    names = set(stack)
    for label, any_of, none_of in PHASES:
        if names.intersection(any_of) and not names.intersection(none_of):
            return label
    return "the rest"


def phases(s, work, calls, think_calls, think):
    """{(label, think): share} of the server's main thread's samples (perf)
    over `calls` calls back to back and `think_calls` after think; None
    when perf recorded none (no permission to trace it, for one)."""
    res = {}
    for t, n in ((0.0, calls), (think, think_calls)):
        path = os.path.join(work, "perf-%g.data" % t)
        p = subprocess.Popen(["perf", "record", "-q", "--call-graph", "dwarf,16384", "-F", "5000",
                              "-t", str(s.pid), "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        for _ in range(n):
            if t:
                time.sleep(t)
            s.execute("1+1")
        p.send_signal(2)
        p.wait()
        stacks = perf_samples(path)
        if not stacks:
            return None
        for st in stacks:
            k = (phase_of(st), t)
            res[k] = res.get(k, 0.0) + 1.0 / len(stacks)
    return res


SPLIT = ("client", "server main", "server threads", "session", "zygote, copies")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--floors", required=True)
    ap.add_argument("--rounds", type=int, default=6, help="interleaved rounds (default 6)")
    ap.add_argument("--calls", type=int, default=150, help="back-to-back calls per round and side")
    ap.add_argument("--think-calls", type=int, default=10, help="calls after think per round and side")
    ap.add_argument("--think", type=float, default=0.1, help="think time in s (default 0.1)")
    ap.add_argument("--base", help="another build of the server (before a change): its sides run in the same rounds")
    ap.add_argument("--files", type=int, default=0,
                    help="files of one byte in each server's workspace, 100 a directory (default 0)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--phases", action="store_true",
                    help="then where the server's main thread spends a call with checkpoints on (needs perf)")
    ap.add_argument("--dockerrun", action="store_true",
                    help="run every server under build/helpers/dockerrun (the namespace-free jail, "
                         "no CAP_SYS_PTRACE: the session's own view stands in for the server's)")
    a = ap.parse_args()
    server_bin = os.path.abspath(a.server)
    if a.dockerrun:
        run.WRAP[:] = [os.path.join(os.path.dirname(server_bin), "helpers", "dockerrun")]
    work = tempfile.mkdtemp(prefix="psm-warm-")
    os.chmod(work, 0o755)
    os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "config")
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    servers = []

    def spawn(name, skill, binary=server_bin):
        root = os.path.join(work, name)
        os.makedirs(root)
        subprocess.run([binary, "--trust", "--yes", "--root", root, "--skill", skill],
                       check=True, stdout=subprocess.DEVNULL)
        for i in range(a.files):
            d = os.path.join(root, "workspace", "data", "d%d" % (i // 100))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%d.csv" % i), "w") as f:
                f.write("x")
        s = run.Server(binary, root, skill, stderr_path=os.path.join(work, name + ".err"))
        servers.append(s)
        return s

    try:
        skills = {"on": os.path.join(run.REPO, "fixtures/bench/SKILL-checkpoint-on.md"),
                  "off": os.path.join(run.REPO, "fixtures/bench/SKILL-checkpoint-off.md")}
        sides = {k: spawn(k, v) for k, v in skills.items()}
        if a.base:
            for k, v in skills.items():
                sides["base " + k] = spawn("base-" + k, v, os.path.abspath(a.base))
        sides["floor"] = run.Server(os.path.join(os.path.abspath(a.floors), "floor_echo"), work)
        servers.append(sides["floor"])
        for s in sides.values():
            s.initialize()
            for _ in range(100):
                s.execute("1+1")
        res = {(k, t): [] for k in sides for t in (0.0, a.think)}
        # CPU per call of each process (schedstat), the servers' sides only:
        # (side, think) -> {part: [ns per call, one per round]}
        cpu = {}

        wakes = {}  # side -> [wake-ups of its tree in each think time]
        woke = {}   # side -> {task: wake-ups}
        think_client = {}  # side -> [client CPU ns of each call after think]

        def think_calls(k, s, n, think):
            """time_calls after think, counting what of the server's tree
            ran while the client slept (the counting's own CPU is left out
            of the client's share)."""
            for _ in range(n):
                w0 = tree_runs(s) if k != "floor" else {}
                time.sleep(think)
                if k != "floor":
                    w1 = tree_runs(s)
                    d = {t: w1[t] - w0.get(t, 0) for t in w1 if w1[t] != w0.get(t, 0)}
                    wakes.setdefault(k, []).append(sum(d.values()))
                    for (p, t), v in d.items():
                        name = who(s, p, t)
                        woke.setdefault(k, {})[name] = woke.get(k, {}).get(name, 0) + v
                c0 = time.thread_time_ns()
                t0 = run.now()
                s.execute("1+1")
                res[(k, think)].append(run.now() - t0)
                think_client.setdefault(k, []).append(time.thread_time_ns() - c0)

        def timed(k, s, n, think):
            c0 = cpu_split(s) if k != "floor" else None
            if think:
                think_calls(k, s, n, think)
            else:
                run.time_calls(s.execute, n, res[(k, think)], think)
            if c0 is not None:
                c1 = cpu_split(s)
                if think:
                    xs = think_client[k][-n:]
                    c1["client"] = c0["client"] + sum(xs)
                for part in SPLIT:
                    cpu.setdefault((k, think), {}).setdefault(part, []).append((c1[part] - c0[part]) / n)

        order = list(sides.items())
        for r in range(a.rounds):
            # Each round starts with another side: none always comes
            # first, after the think time of the round before.
            rot = order[r % len(order):] + order[:r % len(order)]
            for k, s in rot:
                timed(k, s, a.calls, 0.0)
            for k, s in rot:
                timed(k, s, a.think_calls, a.think)
            run.log("round %d/%d" % (r + 1, a.rounds))
        pipe = {}
        for think, argv in ((0.0, ["2000"]), (a.think, [str(a.think_calls * a.rounds), str(a.think * 1000)])):
            o = subprocess.run([os.path.join(a.floors, "floor_pipe")] + argv,
                               capture_output=True, text=True, check=True).stdout.split()
            pipe[think] = float(o[0])
        print("| measurement | n | median | p90 | / client floor |")
        print("|---|---:|---:|---:|---:|")
        for think in (0.0, a.think):
            fl = run.med(res[("floor", think)])
            when = "back to back" if not think else "after %g ms think" % (think * 1000)
            labels = [("floor", "client floor"), ("on", "checkpoints on"), ("off", "checkpoints off")]
            if a.base:
                labels += [("base on", "checkpoints on, --base"), ("base off", "checkpoints off, --base")]
            for k, label in labels:
                xs = res[(k, think)]
                print("| `1+1` %s, %s | %d | %.0f µs | %.0f µs | %.2f× |" % (
                    when, label, len(xs), run.med(xs) * 1e6, run.pct(xs, 90) * 1e6, run.med(xs) / fl))
            print("| pipe round trip (C), %s | | %.0f µs | | |" % (when, pipe[think]))
        print()
        print("CPU per call (schedstat, median of the rounds' means); what the wall time has beyond their sum is waiting")
        print()
        print("| side | " + " | ".join(SPLIT) + " | sum | wall (median) |")
        print("|---|" + "---:|" * (len(SPLIT) + 2))
        for (k, think), parts in sorted(cpu.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            meds = [run.med(parts[p]) / 1000.0 for p in SPLIT]
            print("| %s, %s | %s | %.0f µs | %.0f µs |" % (
                k, "back to back" if not think else "after think", " | ".join("%.0f µs" % m for m in meds),
                sum(meds), run.med(res[(k, think)]) * 1e6))
        print()
        for k, w in sorted(wakes.items()):
            print("%s: the server's threads and processes were put on a CPU %d times in %d think times of %g ms "
                  "(most in one: %d)%s" % (k, sum(w), len(w), a.think * 1000, max(w),
                                          "".join("; %s %d" % kv for kv in sorted(woke.get(k, {}).items()))))
        if a.phases:
            print()
            ph = phases(sides["on"], work, a.calls, a.calls, a.think) if shutil.which("perf") else None
            if not shutil.which("perf"):
                print("--phases: perf is not installed (Debian: linux-perf), so no table of phases")
            elif ph is None:
                print("--phases: perf recorded no samples of the server's main thread (see "
                      "/proc/sys/kernel/perf_event_paranoid), so no table of phases")
            else:
                # Shares of the CPU per call the rounds measured without perf
                # (perf's own sampling slows the thread it samples).
                main_us = {t: run.med(cpu[("on", t)]["server main"]) / 1000.0 for t in (0.0, a.think)}
                print("Where the server's main thread spends a call, checkpoints on: each phase's share of "
                      "perf's samples of the thread, times its CPU per call in the rounds above")
                print()
                print("| phase | back to back | after %g ms think |" % (a.think * 1000))
                print("|---|---:|---:|")
                for label in [x[0] for x in PHASES] + ["the rest"]:
                    print("| %s | %.0f µs | %.0f µs |" % (label, ph.get((label, 0.0), 0.0) * main_us[0.0],
                                                         ph.get((label, a.think), 0.0) * main_us[a.think]))
                print("| all | %.0f µs | %.0f µs |" % (main_us[0.0], main_us[a.think]))
    finally:
        for s in servers:
            s.close()
        if a.keep:
            run.log("scratch directory kept: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
