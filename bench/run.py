#!/usr/bin/python3
"""make bench: python-sandbox-mcp against its alternatives, side by side.

One run, one machine, one process tree: the server (spoken to over its
stdin/stdout as an MCP client would, one JSON-RPC object per line), a warm
Jupyter kernel (jupyter_client), a `python3 -c` subprocess per call, and the
floors (a pipe round trip, PyRun_String in-process).  Prints a table of
medians, p99 and ratios, then the project's speed targets with PASS/MISS.

Absolute times on a shared machine are noise; the ratios, measured in
interleaved rounds so that the alternatives see the same load, are the
figures to quote.  Run with Debian's /usr/bin/python3 (numpy, pandas,
matplotlib, jupyter_client from Debian packages).
"""
import argparse
import json
import math
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GIB = 1 << 30

# ------------------------------------------------------------------ stats


def pct(xs, p):
    """Nearest-rank percentile (p99 of fewer than 100 samples is the max)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def med(xs):
    s = sorted(xs)
    if not s:
        return float("nan")
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def now():
    return time.perf_counter()


def time_calls(execute, n, out, think=0.0):
    """n calls of execute("1+1"), each after `think` s idle, timed into out."""
    for _ in range(n):
        if think:
            time.sleep(think)
        t0 = now()
        execute("1+1")
        out.append(now() - t0)


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ /proc


def proc_ticks(pid):
    """(own CPU, reaped children's CPU) in clock ticks, and the same for minor faults."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    x = st[st.rindex(")") + 2:].split()
    return int(x[11]) + int(x[12]), int(x[13]) + int(x[14]), int(x[7]), int(x[8])


def proc_children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid):
    kids = proc_children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def smaps_rollup(pid):
    r = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    r[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return r


def reset_hwm(pid):
    """Peak RSS back to the current RSS (writing 5 to clear_refs, Linux 4.0+)."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ MCP client


class ServerError(Exception):
    pass


# A launcher the server is started under (--wrap): build/helpers/dockerrun
# runs it under a container runtime's default rules, so the jail takes its
# namespace-free mode (Landlock + seccomp).
WRAP = []


class Server:
    """The server as a child process; JSON-RPC lines over its stdio."""

    def __init__(self, binary, root, skill=None, extra=(), stderr_path=None, env=None):
        self.t_spawn = now()
        args = [binary] if binary.endswith("floor_echo") else WRAP + [binary, "--root", root]
        if skill:
            args += ["--skill", skill]
        args += list(extra)
        self.stderr = open(stderr_path or os.devnull, "ab")
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.stderr, bufsize=0, cwd=root, env=env)
        self.pid = self.p.pid
        self.inp = self.p.stdin.fileno()
        self.out = self.p.stdout.fileno()
        self.buf = b""
        self.next_id = 1

    def send(self, obj):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        while data:
            n = os.write(self.inp, data)
            data = data[n:]

    def recv(self, deadline):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 1:]
                if line.strip():
                    return json.loads(line)
                continue
            left = deadline - now()
            if left <= 0:
                raise ServerError("no reply within the deadline")
            r, _, _ = select.select([self.out], [], [], left)
            if r:
                chunk = os.read(self.out, 1 << 20)
                if not chunk:
                    raise ServerError("the server closed stdout (exit status %s)" % self.p.poll())
                self.buf += chunk

    def request(self, method, params=None, timeout=120.0):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        deadline = now() + timeout
        while True:
            m = self.recv(deadline)
            if m.get("id") == rid and ("result" in m or "error" in m):
                if "error" in m:
                    raise ServerError("%s -> %s" % (method, json.dumps(m["error"])))
                return m["result"]

    def initialize(self, timeout=30.0):
        r = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "1"}},
                         timeout=timeout)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def execute(self, code, session=None, timeout_s=None, timeout=120.0, check=True, fork_from=None):
        args = {"code": code}
        if session:
            args["session"] = session
        if timeout_s:
            args["timeout_s"] = timeout_s
        if fork_from:
            args["fork_from"] = fork_from
        r = self.request("tools/call", {"name": "execute_python", "arguments": args},
                         timeout=timeout)
        text = r.get("content", [{}])[0].get("text", "")
        if check and (r.get("isError") or not text.startswith("ok")):
            raise ServerError("execute_python %r -> %s" % (code[:60], text[:600]))
        return text

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        self.stderr.close()


def result_of(text):
    """The `result:` section of execute_python's text block."""
    i = text.find("\nresult:\n")
    if i < 0:
        return None
    return text[i + 9:].split("\n", 1)[0]


# ------------------------------------------------------------------ Jupyter


class Kernel:
    def __init__(self, env):
        from jupyter_client import KernelManager

        self.km = KernelManager(kernel_name="python3")
        env = dict(env, PYDEVD_DISABLE_FILE_VALIDATION="1")
        self.km.start_kernel(env=env, stderr=subprocess.DEVNULL)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=120)
        except Exception:
            # A kernel that did not come up in time is still running, in a
            # session of its own: end it, or it outlives the benchmark.
            self.close()
            raise

    def execute(self, code, user_expressions=None, timeout=120.0):
        """Time to the shell channel's execute_reply (the lower bound of a
        Jupyter round trip: the result itself travels on iopub)."""
        mid = self.kc.execute(code, silent=False, store_history=True,
                              user_expressions=user_expressions or {})
        while True:
            rep = self.kc.get_shell_msg(timeout=timeout)
            if rep["parent_header"].get("msg_id") == mid:
                break
        c = rep["content"]
        if c.get("status") != "ok":
            raise RuntimeError("jupyter: %s" % c)
        return c

    def drain(self):
        while True:
            try:
                self.kc.get_iopub_msg(timeout=0)
            except Exception:
                return

    def close(self):
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass


# ------------------------------------------------------------------ report


class Report:
    def __init__(self):
        self.rows = []      # (section, label, n, median, p99, unit, note)
        self.targets = []   # (label, measured, target, ok)
        self.failures = []  # (what, detail)
        self.stats = {}

    def add(self, key, section, label, xs, unit="ms", scale=1000.0, note=""):
        xs = [x * scale for x in xs]
        self.stats[key] = xs
        self.rows.append((section, label, len(xs), med(xs), pct(xs, 99), unit, note))

    def value(self, key, section, label, v, unit, note=""):
        self.stats[key] = [v]
        self.rows.append((section, label, 1, v, None, unit, note))

    def fail(self, what, detail):
        log("FAILED: %s: %s" % (what, detail))
        self.failures.append((what, str(detail)))

    def m(self, key):
        xs = self.stats.get(key)
        return med(xs) if xs else None

    def target(self, label, measured, target, ok):
        self.targets.append((label, measured, target, ok))

    def render(self, header):
        out = [header, ""]
        out.append("| section | measurement | n | median | p99 | note |")
        out.append("|---|---|---:|---:|---:|---|")
        for sec, label, n, md, p99, unit, note in self.rows:
            f = fmt_num(md, unit)
            g = "" if p99 is None else fmt_num(p99, unit)
            out.append("| %s | %s | %s | %s | %s | %s |" % (sec, label, n or "", f, g, note))
        out.append("")
        out.append("| target | measured | target | |")
        out.append("|---|---|---|---|")
        for label, measured, target, ok in self.targets:
            verdict = "n/a" if ok is None else ("PASS" if ok else "MISS")
            out.append("| %s | %s | %s | %s |" % (label, measured, target, verdict))
        if self.failures:
            out.append("")
            out.append("Measurements that could not be taken:")
            for what, detail in self.failures:
                out.append("- %s: %s" % (what, detail.replace("\n", " ")[:600]))
        return "\n".join(out)


def fmt_num(v, unit):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "ms":
        if v < 1:
            return "%.0f µs" % (v * 1000)
        if v < 100:
            return "%.2f ms" % v
        return "%.0f ms" % v
    if unit == "µs":
        return "%.1f µs" % v
    if unit == "x":
        return "%.2f×" % v
    return "%.1f %s" % (v, unit)


def ratio(a, b):
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return a / b


# ------------------------------------------------------------------ the run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--floors", required=True, help="directory with floor_pipe and floor_pyrun")
    ap.add_argument("--results", help="write the table (markdown) here too")
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke run)")
    ap.add_argument("--skip", default="", help="comma-separated: jupyter,cold,output,rewrite,strings")
    ap.add_argument("--wrap", help="start the server under this launcher (e.g. build/helpers/dockerrun: "
                    "the jail's namespace-free mode)")
    ap.add_argument("--append", action="store_true", help="append to --results instead of replacing it")
    ap.add_argument("--targets", help="record the 1 GiB rewrite's ratios in this JSON file (bench/targets.py)")
    a = ap.parse_args()
    if a.wrap:
        WRAP[:] = [os.path.abspath(a.wrap)]
    skip = set(x for x in a.skip.split(",") if x)
    Q = a.quick
    server_bin = os.path.abspath(a.server)
    skill_on = os.path.join(REPO, "fixtures/bench/SKILL-checkpoint-on.md")
    skill_off = os.path.join(REPO, "fixtures/bench/SKILL-checkpoint-off.md")
    work = tempfile.mkdtemp(prefix="psm-bench-")
    # Searchable by the sandbox's uid 65534, which the namespace-free jail
    # (--wrap) runs the code as: a private directory above the project
    # would make every call fail.
    os.chmod(work, 0o755)
    # The bench's policies ask for more sessions than the built-in policy
    # allows; they are approved in a configuration of the bench's own, and
    # what the servers learn or save stays in the scratch directory too,
    # never in the user's.
    os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "config")
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    log("scratch directory %s; server %s" % (work, server_bin))
    R = Report()
    t_start = now()
    # The environment that the zygote gives Python, for the alternatives.
    mplcfg = os.path.join(work, "mplconfig")
    os.makedirs(mplcfg)
    pyenv = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
             "MPLBACKEND": "Agg", "MPLCONFIGDIR": mplcfg, "OPENBLAS_NUM_THREADS": "1",
             "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
    py = "/usr/bin/python3"
    servers, kernels = [], []

    def spawn(root_name, skill, stderr_name):
        root = os.path.join(work, root_name)
        os.makedirs(root, exist_ok=True)
        if skill:
            subprocess.run([server_bin, "--trust", "--yes", "--root", root, "--skill", skill],
                           check=True, stdout=subprocess.DEVNULL)
        s = Server(server_bin, root, skill, stderr_path=os.path.join(work, stderr_name))
        servers.append(s)
        return s

    try:
        # -------------------------------------------------- floors
        log("floors")
        fl = {}
        try:
            o = subprocess.run([os.path.join(a.floors, "floor_pipe"), "2000" if Q else "20000"],
                               capture_output=True, text=True, check=True).stdout.split()
            fl["pipe"] = (float(o[0]), float(o[1]), int(o[2]))
            o = subprocess.run([os.path.join(a.floors, "floor_pyrun"), "2000" if Q else "20000"],
                               capture_output=True, text=True, check=True, env=pyenv).stdout.split()
            fl["pyrun"] = (float(o[0]), float(o[1]), int(o[2]))
            fl["repl"] = (float(o[3]), float(o[4]), int(o[5]))
        except (subprocess.CalledProcessError, OSError, IndexError) as e:
            R.fail("floors", e)
        try:  # the bench's own MCP client against a canned-reply process
            e = Server(os.path.join(os.path.abspath(a.floors), "floor_echo"), work)
            e.initialize()
            for _ in range(200):
                e.execute("1+1")
            xs = []
            for _ in range(500 if Q else 5000):
                t0 = now()
                e.execute("1+1")
                xs.append(now() - t0)
            fl["echo"] = (med(xs) * 1e6, pct(xs, 99) * 1e6, len(xs))
            # The same after the warm section's think time: the floor a
            # call after think is held to (each side asleep, woken by it).
            xs = []
            time_calls(e.execute, 10 if Q else 40, xs, 0.1)
            fl["echo_think"] = (med(xs) * 1e6, pct(xs, 99) * 1e6, len(xs))
            e.close()
        except (ServerError, OSError) as e:
            R.fail("echo floor", e)
        try:
            o = subprocess.run([os.path.join(a.floors, "floor_pipe"), "10" if Q else "40", "100"],
                               capture_output=True, text=True, check=True).stdout.split()
            fl["pipe_think"] = (float(o[0]), float(o[1]), int(o[2]))
        except (subprocess.CalledProcessError, OSError, IndexError) as e:
            R.fail("pipe floor after think", e)
        try:  # the machine's price of a copy-on-write page: what a checkpoint's fork makes dearer
            o = subprocess.run([os.path.join(a.floors, "floor_cow"), "5" if Q else "20"],
                               capture_output=True, text=True, check=True).stdout.split()
            fl["cow"] = (float(o[0]), float(o[1]), int(o[2]))
        except (subprocess.CalledProcessError, OSError, IndexError) as e:
            R.fail("copy-on-write floor", e)
        for key, label in (("pipe", "pipe round trip, 64 B, two processes (C)"),
                           ("echo", "this MCP client ↔ a canned-reply process (C): client floor"),
                           ("pipe_think", "pipe round trip after 100 ms think (C)"),
                           ("echo_think", "client floor after 100 ms think"),
                           ("pyrun", "PyRun_String(\"1+1\") in-process (C, stack imported)"),
                           ("repl", "same through ast split + exec/eval + repr (in-process)"),
                           ("cow", "a 4 KiB page written after a fork, copied (C): the machine's price of a checkpoint's page")):
            if key in fl:
                md, p99, n = fl[key]
                R.stats["floor_" + key] = [md / 1000.0]
                R.rows.append(("floor", label, n, md / 1000.0, p99 / 1000.0, "ms", ""))

        # -------------------------------------------------- cold start
        if "cold" not in skip:
            log("cold start: server, python3 -c, Jupyter")
            cold_root = os.path.join(work, "cold")
            os.makedirs(cold_root)
            t_init, t_first, t_py, t_pybare, t_jup = [], [], [], [], []
            rounds = 3 if Q else 10
            stack = "import numpy, pandas, matplotlib.pyplot"
            cold_code = "import pandas, matplotlib.pyplot"

            def one_cold(record=True):
                s = Server(server_bin, cold_root, None, stderr_path=os.path.join(work, "cold.err"))
                try:
                    s.initialize()
                    ti = now() - s.t_spawn
                    s.execute(cold_code, timeout=60)
                    tf = now() - s.t_spawn
                    if record:
                        t_init.append(ti)
                        t_first.append(tf)
                finally:
                    s.close()

            def one_init():
                s = Server(server_bin, cold_root, None, stderr_path=os.path.join(work, "cold.err"))
                try:
                    s.initialize()
                    t_init.append(now() - s.t_spawn)
                finally:
                    s.close()

            try:
                one_cold(record=False)  # matplotlib's font cache in the workspace, page cache
                subprocess.run([py, "-c", stack], env=pyenv, check=True)
                for r in range(rounds):
                    one_cold()
                    for _ in range(3):
                        one_init()
                    t0 = now()
                    subprocess.run([py, "-c", stack + "; print(1+1)"], env=pyenv, check=True,
                                   stdout=subprocess.DEVNULL)
                    t_py.append(now() - t0)
                    for _ in range(3):
                        t0 = now()
                        subprocess.run([py, "-c", "print(1+1)"], env=pyenv, check=True,
                                       stdout=subprocess.DEVNULL)
                        t_pybare.append(now() - t0)
                    if "jupyter" not in skip and r < (1 if Q else 3):
                        try:
                            t0 = now()
                            k = Kernel(pyenv)
                            k.execute(cold_code)
                            t_jup.append(now() - t0)
                            k.close()
                        except Exception as e:
                            R.fail("Jupyter cold start", e)
                            skip.add("jupyter")
            except (ServerError, OSError, subprocess.CalledProcessError) as e:
                R.fail("cold start (spawn, initialize, `%s`)" % cold_code, e)
            R.add("init", "1 cold", "spawn → initialize reply", t_init)
            R.add("cold", "1 cold", "spawn → first result of `%s`" % cold_code, t_first)
            R.add("py_stack", "1 cold", "alt: `python3 -c '%s; print(1+1)'` (bare import time of the stack)" % stack, t_py)
            R.add("py_bare", "1 cold", "alt: `python3 -c 'print(1+1)'`", t_pybare)
            if t_jup:
                R.add("jup_cold", "1 cold", "alt: Jupyter kernel start → first result of `%s`" % cold_code, t_jup)

        # -------------------------------------------------- warm servers
        log("warm: starting servers (checkpoints on and off) and a Jupyter kernel")
        A = spawn("on", skill_on, "on.err")
        B = spawn("off", skill_off, "off.err")
        A.initialize()
        B.initialize()
        k = None
        try:
            A.execute("1+1")
            B.execute("1+1")
        except ServerError as e:
            R.fail("warm servers: first call", e)
            raise
        if "jupyter" not in skip:
            try:
                k = Kernel(pyenv)
                kernels.append(k)
                k.execute("1+1")
            except Exception as e:
                R.fail("Jupyter kernel", e)
                k = None
        for _ in range(50):  # warm-up
            A.execute("1+1")
            B.execute("1+1")
            if k:
                k.execute("1+1")
        if k:
            k.drain()

        # -------------------------------------------------- 2. warm 1+1
        # Back to back, then with 100 ms of think time before each call.
        warm = {}
        # (think s, (rounds, calls per round), Jupyter gets calls / this)
        modes = ((0.0, (2, 50) if Q else (6, 150), 3), (0.1, (1, 5) if Q else (3, 12), 1))
        for think, (rounds, per), jdiv in modes:
            log(f"warm 1+1, {'100 ms think time' if think else 'back to back'}")
            on, off, jup = warm[think] = ([], [], [])
            for _ in range(rounds):
                time_calls(A.execute, per, on, think)
                time_calls(B.execute, per, off, think)
                if k:
                    time_calls(k.execute, per // jdiv, jup, think)
                    k.drain()
        on, off, jup = warm[0.0]
        R.add("warm", "2 warm", "`1+1` through MCP stdio, back to back (checkpoints on)", on)
        R.add("warm_off", "2 warm", "`1+1` back to back, checkpoints off", off)
        if jup:
            R.add("jup_warm", "2 warm", "alt: warm Jupyter kernel, execute `1+1` → execute_reply", jup)
        on_t, off_t, jup_t = warm[0.1]
        R.add("warm_think", "2 warm", "`1+1` after 100 ms think time (checkpoints on)", on_t)
        R.add("warm_think_off", "2 warm", "`1+1` after 100 ms think time, checkpoints off", off_t)
        if jup_t:
            R.add("jup_think", "2 warm", "alt: Jupyter `1+1` after 100 ms think time", jup_t)
        if "py_bare" in R.stats:
            R.rows.append(("2 warm", "alt: `python3 -c` per call (see 1 cold)", len(R.stats["py_bare"]),
                           R.m("py_bare"), pct(R.stats["py_bare"], 99), "ms", "bare; with the stack see 1 cold"))

        # -------------------------------------------------- 2. page faults per call
        # The session's own minor-fault counter (/proc/PID/stat) around a
        # `1+1` after think time: with checkpoints on, each page the call
        # writes is shared with the checkpoint forked after the previous
        # call, unless the session copied it in the meantime.
        def session_pid(srv, name):
            for p in descendants(srv.pid):
                try:
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        if (": session %s" % name).encode() in f.read():
                            return p
                except OSError:
                    pass
            return None

        def minflt(pid):
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
            return int(st[st.rindex(")") + 2:].split()[7])

        for key, srv, label in (("faults_think", A, "checkpoints on"), ("faults_think_off", B, "checkpoints off")):
            pid = session_pid(srv, "default")
            if pid is None:
                R.fail("page faults per call (%s)" % label, "no session process found")
                continue
            fl = []
            try:
                for _ in range(5 if Q else 20):
                    time.sleep(0.1)
                    f0 = minflt(pid)
                    srv.execute("1+1")
                    fl.append(minflt(pid) - f0)
            except (ServerError, OSError, ValueError) as e:
                R.fail("page faults per call (%s)" % label, e)
            R.add(key, "2 warm", "minor faults of the session during a `1+1` after 100 ms think (%s)" % label, fl,
                  unit="faults", scale=1.0)

        # -------------------------------------------------- 3. new session, 7. PSS
        log("new sessions, PSS of an idle session")
        ns_on, ns_off, pss, pss_tree = [], [], [], []
        pss_detail = []
        nnew = 4 if Q else 16
        for i in range(nnew):
            for lst, srv in ((ns_on, A), (ns_off, B)):
                time.sleep(0.3)
                before = set(descendants(srv.pid))
                tree_before = sum(smaps_rollup(p).get("Pss", 0) for p in before)
                t0 = now()
                srv.execute("1+1", session="new%d" % i)
                lst.append(now() - t0)
                if srv is A and i < 6:
                    time.sleep(0.5)  # the checkpoint is forked after the reply
                    after = set(descendants(srv.pid))
                    new = sorted(after - before)
                    sm = [smaps_rollup(p) for p in new]
                    pss.append(sum(x.get("Pss", 0) for x in sm) / 1024.0)
                    pss_tree.append((sum(smaps_rollup(p).get("Pss", 0) for p in after) - tree_before) / 1024.0)
                    pss_detail.append("%d processes: %s" % (len(new), ", ".join(
                        "Pss %.1f MB (anon %.1f, Rss %.1f)" % (x.get("Pss", 0) / 1024.0, x.get("Pss_Anon", 0) / 1024.0,
                                                                x.get("Rss", 0) / 1024.0) for x in sm)))
        R.add("newsess", "3 session", "new session once warm: first `1+1` in it (checkpoints on)", ns_on)
        R.add("newsess_off", "3 session", "new session once warm, checkpoints off", ns_off)
        R.add("pss", "7 memory", "PSS of an extra idle session (its processes; first = beside `default` only)", pss, unit="MB", scale=1.0,
              note=pss_detail[0] if pss_detail else "")
        R.add("pss_tree", "7 memory", "growth of the whole tree's PSS for that session (MB)", pss_tree, unit="MB",
              scale=1.0, note="others' PSS falls as shared pages gain a sharer")

        # -------------------------------------------------- 4. groupby overhead
        log("pandas groupby over 1e6 rows")
        setup = ("import numpy as np, pandas as pd, time\n"
                 "rng = np.random.default_rng(0)\n"
                 "df = pd.DataFrame({'k': rng.integers(0, 1000, 10**6), 'v': rng.random(10**6)})\n"
                 "None")
        work_code = ("_t0 = time.perf_counter()\n"
                     "g = df.groupby('k')['v'].agg(['mean', 'sum', 'count'])\n"
                     "_dt = time.perf_counter() - _t0\n")
        try:
            A.execute(setup, session="gb")
            A.execute(work_code + "_dt", session="gb")
        except ServerError as e:
            R.fail("groupby setup", e)
        if k:
            k.execute(setup)
            k.execute(work_code)
        tot, ins, ovh, jtot, jins, jovh = [], [], [], [], [], []
        for _ in range(4 if Q else 20):
            time.sleep(0.05)
            t0 = now()
            text = A.execute(work_code + "_dt", session="gb")
            t = now() - t0
            inside = float(result_of(text))
            tot.append(t)
            ins.append(inside)
            ovh.append(t - inside)
            if k:
                time.sleep(0.05)
                t0 = now()
                c = k.execute(work_code, user_expressions={"dt": "_dt"})
                t = now() - t0
                inside = float(c["user_expressions"]["dt"]["data"]["text/plain"])
                jtot.append(t)
                jins.append(inside)
                jovh.append(t - inside)
        if k:
            k.drain()
        R.add("gb_total", "4 groupby", "groupby 1e6 rows: total through MCP", tot)
        R.add("gb_inside", "4 groupby", "same work timed inside the interpreter", ins)
        R.add("gb_overhead", "4 groupby", "our overhead (total − inside, per call)", ovh)
        if jtot:
            R.add("jup_gb_overhead", "4 groupby", "alt: Jupyter overhead (total − inside)", jovh,
                  note="total %.1f ms, inside %.1f ms" % (med(jtot) * 1000, med(jins) * 1000))

        # -------------------------------------------------- 5. 1 GB printed
        if "output" not in skip:
            log("1 GiB printed")
            out_code = ("import sys\n"
                        "_s = ('x' * 1023 + '\\n') * 1024\n"
                        "for _ in range(1024):\n"
                        "    sys.stdout.write(_s)\n")
            thr, grow, hwm, floor_thr = [], [], [], []
            try:
                A.execute("1+1", session="out")
                for _ in range(2 if Q else 3):
                    shutil.rmtree(os.path.join(work, "on", "workspace", ".logs"), ignore_errors=True)
                    time.sleep(0.3)
                    if not reset_hwm(A.pid):
                        R.fail("1 GiB printed", "cannot reset VmHWM (clear_refs); the growth is from start-up")
                    rss0 = status_kb(A.pid, "VmRSS")
                    t0 = now()
                    A.execute(out_code, session="out", timeout_s=300, timeout=400)
                    t = now() - t0
                    h = status_kb(A.pid, "VmHWM")
                    thr.append(GIB / t / 1e6)
                    grow.append((h - rss0) / 1024.0)
                    hwm.append(h / 1024.0)
                    # floor: the same cell in python3, stdout a pipe that we drain
                    t0 = now()
                    p = subprocess.Popen([py, "-c", out_code], env=pyenv, stdout=subprocess.PIPE, bufsize=0)
                    fd = p.stdout.fileno()
                    n = 0
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b:
                            break
                        n += len(b)
                    p.wait()
                    floor_thr.append(n / (now() - t0) / 1e6)
            except (ServerError, OSError) as e:
                R.fail("1 GiB printed", e)
            shutil.rmtree(os.path.join(work, "on", "workspace", ".logs"), ignore_errors=True)
            R.add("out_thr", "5 output", "1 GiB printed through the server: throughput (MB/s)", thr, unit="MB/s", scale=1.0)
            R.add("out_floor", "5 output", "alt: same cell in `python3 -c`, stdout a drained pipe (MB/s)", floor_thr,
                  unit="MB/s", scale=1.0)
            R.add("out_grow", "5 output", "server peak RSS growth during it (VmHWM − VmRSS before, MB)", grow,
                  unit="MB", scale=1.0, note="peak VmHWM %.1f MB" % (max(hwm) if hwm else 0))

        # -------------------------------------------------- 6. 1 GB rewrite
        if "rewrite" not in skip:
            log("1 GiB numpy array rewritten, checkpoints on and off")
            # The timer lives in the setup cell: a cell that names the clock
            # is checkpointed (the replay log: its second run would differ),
            # and the cell timed is the user's `a += 1`, which does not.
            rw_setup = ("import numpy as np, time\na = np.ones(1 << 27)\n"
                        "def _timed(code):\n    t0 = time.perf_counter()\n    exec(code, globals())\n"
                        "    return time.perf_counter() - t0\nNone")
            rw_code = "_timed('a += 1')"
            rw = {"on": [], "off": [], "on_b2b": [], "off_b2b": [], "on_in": [], "off_in": []}
            try:
                A.execute(rw_setup, session="big")
                B.execute(rw_setup, session="big")
                for _ in range(2 if Q else 5):
                    for name, srv in (("on", A), ("off", B)):
                        time.sleep(1.0)  # think time: the checkpoint is forked after the reply
                        t0 = now()
                        text = srv.execute(rw_code, session="big")
                        rw[name].append(now() - t0)
                        rw[name + "_in"].append(float(result_of(text)))
                for name, srv in (("on", A), ("off", B)):
                    for _ in range(2 if Q else 4):
                        t0 = now()
                        srv.execute(rw_code, session="big")
                        rw[name + "_b2b"].append(now() - t0)
                A.execute("del a", session="big")
                B.execute("del a", session="big")
            except (ServerError, TypeError, ValueError) as e:
                R.fail("1 GiB rewrite", e)
            R.add("rw_on", "6 checkpoint", "`a += 1` on a 1 GiB array, checkpoints on (1 s think time)", rw["on"])
            R.add("rw_off", "6 checkpoint", "same, checkpoints off", rw["off"])
            R.add("rw_on_in", "6 checkpoint", "inside the interpreter, checkpoints on", rw["on_in"])
            R.add("rw_off_in", "6 checkpoint", "inside the interpreter, checkpoints off", rw["off_in"])
            R.add("rw_on_b2b", "6 checkpoint", "back to back (no think time), checkpoints on", rw["on_b2b"])
            R.add("rw_off_b2b", "6 checkpoint", "back to back, checkpoints off", rw["off_b2b"])
        # -------------------------------------------------- 8. string-heavy pandas
        # An object column of millions of Python strings: `str.len()`
        # touches every string, so writes the reference count of each, and
        # with checkpoints on every page that holds one is copied on write.
        if "strings" not in skip:
            nrows = 500000 if Q else 5000000
            log("string-heavy pandas: %d-row object column, checkpoints on and off" % nrows)
            st_setup = ("import numpy as np, pandas as pd, time\n"
                        "sdf = pd.DataFrame({'s': pd.Series(np.arange(%d)).astype(str)})\n"
                        "None" % nrows)
            st_code = ("_t0 = time.perf_counter()\n"
                       "_n = int(sdf['s'].str.len().sum())\n"
                       "time.perf_counter() - _t0")
            sr = {"on": [], "off": [], "on_in": [], "off_in": []}
            try:
                A.execute(st_setup, session="str", timeout_s=600, timeout=900)
                B.execute(st_setup, session="str", timeout_s=600, timeout=900)
                for _ in range(2 if Q else 5):
                    for name, srv in (("on", A), ("off", B)):
                        time.sleep(1.0)  # think time: the checkpoint is forked after the reply
                        t0 = now()
                        text = srv.execute(st_code, session="str", timeout_s=600, timeout=900)
                        sr[name].append(now() - t0)
                        sr[name + "_in"].append(float(result_of(text)))
                A.execute("del sdf", session="str")
                B.execute("del sdf", session="str")
            except (ServerError, TypeError, ValueError) as e:
                R.fail("string-heavy pandas", e)
            what = "`df['s'].str.len().sum()` over %s rows of strings" % ("{:,}".format(nrows))
            R.add("str_on", "8 strings", what + ", checkpoints on (1 s think time)", sr["on"])
            R.add("str_off", "8 strings", "same, checkpoints off", sr["off"])
            R.add("str_on_in", "8 strings", "inside the interpreter, checkpoints on", sr["on_in"])
            R.add("str_off_in", "8 strings", "inside the interpreter, checkpoints off", sr["off_in"])
    except Exception as e:  # keep what was measured
        import traceback

        R.fail("bench driver", "%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
    finally:
        for k_ in kernels:
            k_.close()
        for s in servers:
            s.close()

    # -------------------------------------------------- ratios and targets
    m = R.m

    def rat(label, num, den, note=""):
        r = ratio(m(num), m(den))
        if r is not None:
            R.rows.append(("ratio", label, 0, r, None, "x", note))
        return r

    r_warm = rat("warm Jupyter / ours, `1+1` back to back", "jup_warm", "warm")
    r_think = rat("warm Jupyter / ours, `1+1` after 100 ms think", "jup_think", "warm_think")
    r_warm_off = rat("warm Jupyter / ours with checkpoints off, back to back", "jup_warm", "warm_off")
    r_think_off = rat("warm Jupyter / ours with checkpoints off, after think", "jup_think", "warm_think_off")
    rat("`python3 -c 'print(1+1)'` / ours warm", "py_bare", "warm")
    rat("ours warm / pipe round trip floor", "warm", "floor_pipe")
    rat("ours warm, checkpoints off / client floor", "warm_off", "floor_echo")
    rat("ours warm / in-process REPL step floor", "warm", "floor_repl")
    r_fl = rat("ours warm / client floor, back to back", "warm", "floor_echo")
    r_flt = rat("ours warm after think / client floor after think", "warm_think", "floor_echo_think")
    rat("ours warm after think, checkpoints off / client floor after think", "warm_think_off", "floor_echo_think")
    rat("ours warm after think / pipe round trip after think", "warm_think", "floor_pipe_think")
    r_cold = rat("our cold first result / bare import of the stack", "cold", "py_stack")
    rat("Jupyter cold / our cold", "jup_cold", "cold")
    r_ck = rat("checkpoints on / off, `1+1` back to back", "warm", "warm_off")
    r_ckt = rat("checkpoints on / off, `1+1` after think", "warm_think", "warm_think_off")
    r_rw = rat("checkpoints on / off, 1 GiB rewrite (think)", "rw_on", "rw_off")
    r_rw_b2b = rat("checkpoints on / off, 1 GiB rewrite (back to back)", "rw_on_b2b", "rw_off_b2b")
    if a.targets and r_rw is not None and r_rw_b2b is not None:
        import targets
        targets.record(a.targets, "rewrite", {"think": r_rw, "b2b": r_rw_b2b})
    r_str = rat("checkpoints on / off, string-heavy pandas (think)", "str_on", "str_off")
    rat("output throughput: ours / python3 into a pipe", "out_thr", "out_floor")
    R.rows = [r for r in R.rows if r[0] != "ratio"] + [r for r in R.rows if r[0] == "ratio"]

    def tgt(label, measured, target, ok):
        R.target(label, measured, target, ok)

    fm = lambda v, f: "-" if v is None else f % v  # noqa: E731
    tgt("warm call vs warm Jupyter kernel (back to back)", fm(r_warm, "%.1f× faster"), "≥ 20×",
        None if r_warm is None else r_warm >= 20)
    tgt("warm call vs warm Jupyter kernel (100 ms think)", fm(r_think, "%.1f× faster"), "≥ 20×",
        None if r_think is None else r_think >= 20)
    tgt("(same, checkpoints off, back to back)", fm(r_warm_off, "%.1f× faster"), "≥ 20×",
        None if r_warm_off is None else r_warm_off >= 20)
    tgt("(same, checkpoints off, 100 ms think)", fm(r_think_off, "%.1f× faster"), "≥ 20×",
        None if r_think_off is None else r_think_off >= 20)
    tgt("warm call vs client floor (back to back)", fm(r_fl, "%.1f×"), "≤ 3×", None if r_fl is None else r_fl <= 3)
    tgt("warm call vs client floor (both after 100 ms think)", fm(r_flt, "%.1f×"), "≤ 3×",
        None if r_flt is None else r_flt <= 3)
    c = m("cold")
    tgt("cold start to first pandas result", fm(c and c / 1000, "%.3f s"), "≤ 0.8 s", None if c is None else c <= 800)
    tgt("cold start vs bare import of the stack", fm(r_cold, "%.2f×"), "≤ 1.2×", None if r_cold is None else r_cold <= 1.2)
    i = m("init")
    tgt("initialize reply after spawn", fm(i, "%.2f ms"), "≤ 20 ms", None if i is None else i <= 20)
    n_ = m("newsess")
    tgt("new session once warm", fm(n_, "%.2f ms"), "≤ 10 ms", None if n_ is None else n_ <= 10)
    g = max(R.stats["out_grow"]) if R.stats.get("out_grow") else None
    tgt("server RSS growth, 1 GiB printed (worst run)", fm(g, "%.1f MB"), "≤ 32 MB", None if g is None else g <= 32)
    p = R.stats["pss"][0] if R.stats.get("pss") else None
    tgt("PSS of one extra idle session (beside `default`)", fm(p, "%.1f MB"), "≤ 15 MB",
        None if p is None else p <= 15)
    p = R.stats["pss_tree"][0] if R.stats.get("pss_tree") else None
    tgt("(whole tree's PSS growth for it)", fm(p, "%.1f MB"), "≤ 15 MB", None if p is None else p <= 15)
    tgt("checkpoints on/off, 1 GiB rewrite", fm(r_rw, "%.2f×"), "≤ 1.3×", None if r_rw is None else r_rw <= 1.3)
    tgt("checkpoints on/off, trivial call back to back", fm(r_ck, "%.2f×"), "no measurable cost (≤ 1.10×)",
        None if r_ck is None else r_ck <= 1.10)
    tgt("checkpoints on/off, trivial call after think", fm(r_ckt, "%.2f×"), "no measurable cost (≤ 1.10×)",
        None if r_ckt is None else r_ckt <= 1.10)
    tgt("checkpoints on/off, string-heavy pandas after think", fm(r_str, "%.2f×"), "reported (≤ 1.3×)",
        None if r_str is None else r_str <= 1.3)

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    header = ("python-sandbox-mcp bench%s, %s\nmachine: %s, nproc %d, %s, kernel %s; load average at the end %.2f %.2f %.2f; "
              "Python %s; run took %.0f s%s" % (
                  " (server under %s: namespace-free jail)" % os.path.basename(a.wrap) if a.wrap else "",
                  time.strftime("%Y-%m-%d %H:%M:%S %Z"), platform.node(), os.cpu_count(), cpu, platform.release(),
                  load[0], load[1], load[2], platform.python_version(), now() - t_start, " (--quick)" if Q else ""))
    table = R.render(header)
    print(table, flush=True)
    if a.results:
        with open(a.results, "a" if a.append else "w") as f:
            if not a.append:
                f.write("# Latest `make bench` results\n\n")
                f.write("Written by `make bench` (bench/run.py); see bench/README.md for what each line means.\n\n")
            else:
                f.write("\n")
            f.write(table + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
