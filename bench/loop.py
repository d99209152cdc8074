#!/usr/bin/python3
"""make bench-loop: one agent working one DataFrame, call after call.

An agent that analyses data keeps one frame in its session and sends cell
after cell against it: describe it, group it, resample it, add a column,
draw a chart, merge a lookup table in, run a test, fit a model, clean a
string column.  This runs that loop (LOOP_CELLS: 14 kinds of cell, twice
over, 28 calls) on a frame of 400,000 and of 4,000,000 rows, with 1 s of
think time before each call and back to back, through:

  ours       the server with its built-in policy: checkpoints, saved
             sessions and the jail all on
  off        the same server and policy with `checkpoint: false` (what
             the checkpoint costs; paired with ours round by round)
  Jupyter    a warm kernel (jupyter_client), the same cells

all in one run, each sequence whole (a call of one side between two calls
of another would be think time the sequence did not ask for), the sides
taking turns in each round and the order reversed every other round.
Prints, per size and mode, each side's sum of call latencies and median
call, the ratios Jupyter / ours of both (above 1: ours faster), a table
per cell, and the loop's targets with PASS or MISS.

Nothing here asserts a time.  --targets FILE records the ratios for
bench/targets.py, which prints every target of `make bench` in one table.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402  (checkpoints on against off, pair by pair)
import run  # noqa: E402  (the bench's MCP client, Jupyter client, stats)
import targets  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The longest a saved session's save waits for the session to rest
# (supervisor/savepace.h: SAVE_IDLE_MAX_MS), and a second more.
SAVE_REST_S = 11.0
# The least a session rests before its state is saved (SAVE_IDLE_MIN_MS).
SAVE_IDLE_MIN_S = 5.0

# The frame: a timestamp, an integer key, three string (object) columns and
# two float columns; 7 columns, about 60 bytes a row before the cells add
# two more.  Deterministic (seeded).
SETUP = """\
import numpy as np, pandas as pd, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
rng = np.random.default_rng(0)
N = {n}
_cats = np.array(['c%02d' % i for i in range(40)], dtype=object)
_regions = np.array(['north', 'south', 'east', 'west'], dtype=object)
_cities = np.array(['san jose', 'austin', 'boston', 'san diego', 'denver', 'seattle',
                    'miami', 'santa fe', 'chicago', 'portland'], dtype=object)
df = pd.DataFrame({{
    'ts': pd.date_range('2025-01-01', periods=N, freq='10s'),
    'key': rng.integers(0, 1000, N),
    'cat': _cats[rng.integers(0, 40, N)],
    'region': _regions[rng.integers(0, 4, N)],
    'city': _cities[rng.integers(0, 10, N)],
    'value': rng.normal(0, 1, N),
    'amount': rng.gamma(2.0, 30.0, N),
}})
len(df)"""

# (kind, code): what an agent sends about its frame.  Each cell is
# idempotent on the state (a column it adds is assigned again the second
# time), so the sequence can run again on the same session.
LOOP_CELLS = [
    ("describe", "df.describe().round(3)"),
    ("groupby", "df.groupby('key')['value'].agg(['mean', 'sum', 'count']).head()"),
    ("resample", "df.set_index('ts')['value'].resample('1h').mean().describe()"),
    ("pivot", "df.pivot_table(index='cat', columns='region', values='amount', aggfunc='mean').round(2).head()"),
    ("z-scores", "df['z'] = (df['value'] - df['value'].mean()) / df['value'].std()\n"
                 "int((df['z'].abs() > 3).sum())"),
    ("new column", "df['hour'] = df['ts'].dt.hour\n"
                   "int(df.groupby('hour')['amount'].sum().idxmax())"),
    ("chart", "fig, ax = plt.subplots(figsize=(6, 3))\n"
              "df.set_index('ts')['amount'].resample('1D').mean().plot(ax=ax)\n"
              "fig.savefig('workspace/loop_chart.png', dpi=80)\nplt.close(fig)\n'saved'"),
    ("merge", "seg = pd.DataFrame({'key': np.arange(1000), "
              "'segment': np.array(['a', 'b', 'c', 'd'])[np.arange(1000) % 4]})\n"
              "df.merge(seg, on='key', how='left').groupby('segment')['amount'].sum().round(1)"),
    ("scipy test", "from scipy import stats\n"
                   "r = stats.ttest_ind(df.loc[df['region'] == 'north', 'value'], "
                   "df.loc[df['region'] == 'south', 'value'])\nround(float(r.pvalue), 6)"),
    ("sklearn fit", "from sklearn.linear_model import LinearRegression\n"
                    "X = df[['amount', 'key']].to_numpy()\n"
                    "LinearRegression().fit(X, df['value'].to_numpy()).coef_.round(6)"),
    ("strings", "float(df['city'].str.upper().str.startswith('SAN').mean().round(4))"),
    ("value counts", "df['cat'].value_counts().head()"),
    ("rolling", "df['value'].rolling(1000).mean().iloc[-3:]"),
    ("quantile bins", "pd.qcut(df['amount'], 10, labels=False).value_counts().sort_index().tolist()"),
]

SIDES = {"ours": "ours (built-in policy)", "off": "ours, `checkpoint: false`", "jupyter": "Jupyter"}


def fmt(ms):
    return "%.1f" % ms if ms < 100 else "%.0f" % ms


def tree_cpu_ms(root):
    """CPU time (user + system, ms) of root and everything below it, the
    children they reaped included: each process's own time plus that of
    the children it waited for, summed over the live tree, counts a process
    that ended in between once, in its reaper's (checkpoints, savers,
    replaced sessions)."""
    return sum(st[0] + st[1] for st in map(_stat, [root] + run.descendants(root)) if st)


def _stat(pid):
    """(own CPU ms, reaped children's CPU ms, minor faults) of pid, or None."""
    t = run.proc_ticks(pid)
    if not t:
        return None
    ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    return t[0] * ms, t[1] * ms, t[2]


def _title(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0].decode("utf-8", "replace").strip()
    except OSError:
        return ""


# Where a server side's CPU goes (docs/ARCHITECTURE.md, the process tree):
# the session's own time, split into the calls (request sent to reply read)
# and the rest (its checkpoint's fork, the pages it copies after the fork,
# while the agent reads); everything else below the server (checkpoints,
# savers, warm-up probes, live or reaped: a process that ended counts in its
# reaper's children's time); the zygote's and the server's own time.
PARTS = (("call", "session, in calls"), ("after", "session, after replies"),
         ("below", "checkpoints, savers"), ("zygote", "zygote"), ("server", "server"))


def tree_parts(root, session_pid):
    """{part: CPU ms so far} of root's tree, PARTS' names, "all" the sum
    (what tree_cpu_ms counts); "session" is the session's own time."""
    own = {"server": 0.0, "zygote": 0.0, "session": 0.0}
    total = 0.0
    for p in [root] + run.descendants(root):
        st = _stat(p)
        if st is None:
            continue
        total += st[0] + st[1]
        if p == root:
            own["server"] += st[0]
        elif p == session_pid:
            own["session"] += st[0]
        elif _title(p).startswith("python-sandbox-mcp: zygote"):
            own["zygote"] += st[0]
    own["below"] = total - own["server"] - own["zygote"] - own["session"]
    own["all"] = total
    return own


def find_session(root, name):
    for p in run.descendants(root):
        if _title(p) == "python-sandbox-mcp: session %s" % name:
            return p
    return None


# The server's debug line for each call that keeps its state
# (supervisor/replay.c): "session loop: cell 5 (312 ms): fork: ... (2 logged,
# 410 ms)" or "...: log (...)"; and its saves (supervisor/saved.c).
VERDICT = re.compile(r"session loop: cell (\d+) \((\d+) ms(?:, \d+ ms to run again)?\): (log|fork: [^(]*?) \(")
SAVES = (("saves", "at rest: saving the state"), ("saved", "state saved ("),
         ("journals", "state saved (a journal of cells"), ("abandoned", "save of the state after cell"))
SAVED = re.compile(r"session loop: state saved \((\d+) bytes in (\d+) ms(?:, (\d+) written)?\)")
# In the order logged: a verdict, a save at rest starting, a save cut short
# or failed (supervisor/saved.c).
EVENT = re.compile(rb"session loop: (?:cell \d+ \(\d+ ms(?:, \d+ ms to run again)?\): (log|fork)"
                   rb"|(at rest: saving the state)"
                   rb"|(the save of the state after cell|the state after cell \d+ was not saved|state not saved))")


class JournalCount:
    """Of the saves at rest, those that follow only logged cells since the
    last whole save was started (bench/CHECKPOINTS.md, "a journal of logged
    cells": such a save could write those cells instead of the state).  A
    save counts as whole when a checkpoint was forked since the last whole
    one, or that one was cut short or failed; a save that could be a journal counts
    as written (an append is not cut short).  Reads the server's log from
    its start, in order, across sequences."""

    def __init__(self):
        self.off = 0
        self.base = False  # a whole save of the log's checkpoint is on disk
        self.whole = False  # the last save started was a whole one

    def read(self, path, since):
        """Saves at rest that could be a journal, among those logged from
        byte `since` on."""
        try:
            with open(path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return 0
        data = data[:data.rfind(b"\n") + 1]  # a line still being written: read next time
        n = 0
        for m in EVENT.finditer(data):
            if m.group(1) == b"fork":
                self.base = False
            elif m.group(2):
                if self.base:
                    n += self.off + m.start() >= since
                    self.whole = False
                else:
                    self.base = self.whole = True
            elif m.group(3) and self.whole:
                self.base = False
        self.off += len(data)
        return n


def read_log(path, off):
    """(verdicts in order, {save event: count}, new offset) of the server's
    stderr from byte off on."""
    try:
        with open(path, "rb") as f:
            f.seek(off)
            text = f.read().decode("utf-8", "replace")
            off = f.tell()
    except OSError:
        return [], {}, off
    verdicts = [m.group(3).strip() for m in VERDICT.finditer(text)]
    saves = {k: text.count(needle) for k, needle in SAVES}
    got = [(int(m.group(1)), int(m.group(2)), int(m.group(3) or m.group(1))) for m in SAVED.finditer(text)]
    saves["bytes"], saves["ms"] = sum(g[0] for g in got), sum(g[1] for g in got)
    # Written: a save in pieces writes only the pieces that changed.
    saves["written"] = sum(g[2] for g in got)
    return verdicts, saves, off


class Ours:
    """One session of one server; code -> latency in s.  With the server's
    log at debug level (its verdict after each call), and the session's own
    CPU time and minor faults read around each call (/proc, one file)."""

    def __init__(self, server_bin, root, skill, stderr_path):
        self.err = stderr_path
        self.s = run.Server(server_bin, root, skill, stderr_path=stderr_path,
                            extra=["--log-level", "debug"])
        self.journal = JournalCount()
        self.s.initialize()
        self.s.execute("1+1", session="loop")
        self.pid = self.s.pid
        self.begin()

    def begin(self):
        """Starts a measured sequence: the tree's CPU by part, the log's end."""
        self.spid = find_session(self.pid, "loop")
        self.in_call = [0.0, 0]  # session's CPU ms, minor faults, within calls
        self.per_call = []  # (CPU ms, minor faults) of the session within each call
        self.faults0 = (_stat(self.spid) or (0, 0, 0))[2] if self.spid else 0
        self.parts0 = self.parts_mid = tree_parts(self.pid, self.spid)
        self.off = os.path.getsize(self.err) if os.path.exists(self.err) else 0

    def mark(self):
        """The sequence's last reply is in: what comes after is its tail
        (the last checkpoint, the save once the session rests)."""
        self.parts_mid = tree_parts(self.pid, self.spid)

    def end(self):
        """(CPU ms by part since begin, session's minor faults in calls and
        after, verdicts, saves) of the sequence."""
        parts = tree_parts(self.pid, self.spid)
        d = {k: parts[k] - self.parts0[k] for k in parts}
        d["call"] = self.in_call[0]
        d["after"] = d.pop("session") - self.in_call[0]
        d["tail"] = {k: parts[k] - self.parts_mid[k] for k in ("below", "server", "all")}
        faults = (_stat(self.spid) or (0, 0, self.faults0))[2] - self.faults0 if self.spid else 0
        since = self.off
        verdicts, saves, self.off = read_log(self.err, self.off)
        saves["journal"] = self.journal.read(self.err, since)
        return d, (self.in_call[1], faults - self.in_call[1]), verdicts, saves, self.per_call

    def reset(self, code):
        r = self.s.request("tools/call", {"name": "execute_python", "arguments": {
            "code": code, "session": "loop", "reset": True, "timeout_s": 300}}, timeout=400)
        text = r.get("content", [{}])[0].get("text", "")
        if r.get("isError") or not text.startswith("ok"):
            raise run.ServerError("setup -> %s" % text[:600])

    def call(self, code):
        a = _stat(self.spid) if self.spid else None
        t0 = run.now()
        self.s.execute(code, session="loop", timeout_s=300, timeout=400)
        dt = run.now() - t0
        b = _stat(self.spid) if a else None
        if a and b:
            self.in_call[0] += b[0] - a[0]
            self.in_call[1] += b[2] - a[2]
        self.per_call.append((b[0] - a[0], b[2] - a[2]) if a and b else None)
        return dt

    def close(self):
        self.s.close()


class Jup:
    def __init__(self, pyenv, root):
        self.k = run.Kernel(dict(pyenv, PWD=root))
        self.k.execute("import os; os.chdir(%r)" % root)
        self.pid = self.k.km.provisioner.process.pid
        self.begin()

    def begin(self):
        self.in_call = [0.0, 0]  # the kernel's own CPU ms, minor faults, within calls
        self.per_call = []

    def end(self):
        return self.in_call[0], self.in_call[1], self.per_call

    def reset(self, code):
        self.k.execute("%reset -f")
        self.k.execute(code, timeout=400)
        self.k.drain()

    def call(self, code):
        a = _stat(self.pid)
        t0 = run.now()
        self.k.execute(code, timeout=400)
        dt = run.now() - t0
        b = _stat(self.pid) if a else None
        if a and b:
            self.in_call[0] += b[0] - a[0]
            self.in_call[1] += b[2] - a[2]
        self.per_call.append((b[0] - a[0], b[2] - a[2]) if a and b else None)
        self.k.drain()
        return dt

    def close(self):
        self.k.close()


def sequence(side, cells, think):
    """The cells one after the other on one side; their latencies (s)."""
    out = []
    for _, code in cells:
        if think:
            time.sleep(think)
        out.append(side.call(code))
    return out


def settle(pid, most=60.0):
    """Waits until the tree below pid uses under 20 ms of CPU in 1 s."""
    end = run.now() + most
    last = tree_cpu_ms(pid)
    while run.now() < end:
        time.sleep(1.0)
        cur = tree_cpu_ms(pid)
        if cur - last < 20:
            return
        last = cur


def interleaved(actors, order, cells, think, idle=None):
    """With think time: call by call, each side in turn (rotating) sleeps
    `think` s and runs the cell, so every side sees the same load at each
    cell; a side is idle at least `think` s before each of its calls.  The
    rotation makes a side's rest between two of its calls n-2 turns of the
    others (a turn: a think and a call) and its own think, or 2n-2 turns
    and its think once in n cells: with three sides and 1 s think, about
    2 s twice, then 5 s and four calls, past the 5 s after which a resting
    session is saved.  idle (a dict) gets each side's rests, in s."""
    out = {s: [] for s in order}
    last = {}
    for i, (_, code) in enumerate(cells):
        k = i % len(order)
        for s in order[k:] + order[:k]:
            time.sleep(think)
            t0 = run.now()
            if idle is not None and s in last:
                idle.setdefault(s, []).append(t0 - last[s])
            out[s].append(actors[s].call(code))
            last[s] = run.now()
    return out


def ab_report(res, cpu, expl, cells, sizes, modes, warm, measured):
    """Checkpoints on against off, pair by pair, and the warm call against
    the client floor (bench/ab.py); sets measured["ab"] for the targets."""
    L = []
    got = {}
    if warm:
        lines, rows = ab.warm_lines(warm)
        L += ["", "Warm `1+1` (a small session of each server, before the frame is built) against this "
              "client's floor (bench/floor_echo.c), %d interleaved rounds, the median call of each round; "
              "the ratio of each round's pair, its median and [spread]:" % len(warm["b2b"]["floor"]), ""] + lines
        got["warm"] = {k: {"ratio": list(v[0]), "text": v[1], "cpu": v[2], "floor_cpu": v[3]}
                       for k, v in rows.items() if v[0]}
    loop = ab.loop_pairs(res, cpu, len(cells), sizes, modes)
    if loop:
        labels = dict(PARTS)
        kinds = {k: ab.loop_kinds(res, expl, cells, [c for c, _ in LOOP_CELLS], int(k.split("/")[0]),
                                  k.split("/")[1]) for k in loop}
        parts = {k: ab.loop_parts(expl, int(k.split("/")[0]), k.split("/")[1], len(cells), PARTS) for k in loop}
        L += [""] + ab.loop_lines(loop, kinds, parts, labels)
        got["loop"] = {k: dict(v, sum=list(v["sum"]) if v["sum"] else None,
                               cpu=list(v["cpu"]) if v["cpu"] else None) for k, v in loop.items()}
        got["kinds"] = {k: [list(r) for r in v] for k, v in kinds.items()}
        got["parts"] = {k: {labels[p]: x for p, x in v.items()} for k, v in parts.items()}
    if got:
        measured["ab"] = got
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--sizes", help="rows of the frame, comma-separated (400000,4000000; --quick: 400000)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="timed sequences per side, size and mode: the pairs of on against off")
    ap.add_argument("--floors", default=os.path.join(REPO, "build", "bench"),
                    help="where bench/floor_echo.c was built (the client floor of the warm call)")
    ap.add_argument("--no-warm", action="store_true", help="leave out the warm `1+1` against the client floor")
    ap.add_argument("--think", type=float, default=1.0, help="seconds of think time before each call")
    ap.add_argument("--modes", default="think,b2b",
                    help="comma-separated: think (each call after --think seconds), b2b (back to back)")
    ap.add_argument("--sides", default="ours,off,jupyter", help="comma-separated: ours,off,jupyter")
    ap.add_argument("--repeat", type=int, default=2, help="times the 14 kinds of cell run in a sequence")
    ap.add_argument("--skill", help="run `ours` under this SKILL.md instead of the built-in policy "
                    "(approved in the run's own configuration directory)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY",
                    help="one more side: another build of the server (or a script that starts one), "
                    "under the built-in policy, compared in the same run (repeatable)")
    ap.add_argument("--also-off", action="append", default=[], metavar="LABEL=BINARY",
                    help="as --also, under the `off` side's policy (`checkpoint: false`): "
                    "what another build's checkpoint-off costs, beside this one's (repeatable)")
    ap.add_argument("--quick", action="store_true",
                    help="development: 3 rounds (too few pairs for a verdict), each kind once, 400k rows")
    ap.add_argument("--results", help="append the tables (markdown) to this file")
    ap.add_argument("--targets", help="record the ratios in this JSON file (bench/targets.py)")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.repeat = min(a.rounds, 3), 1
        a.sizes = a.sizes or "400000"
    a.sizes = a.sizes or "400000,4000000"
    sides = [s for s in a.sides.split(",") if s]
    for s in sides:
        if s not in SIDES:
            sys.exit("loop.py: unknown side %r (ours, off, jupyter)" % s)
    also, also_off = {}, set()
    for opt, xs in (("--also", a.also), ("--also-off", a.also_off)):
        for x in xs:
            label, sep, binary = x.partition("=")
            if not sep or not label or label in SIDES or not os.access(binary, os.X_OK):
                sys.exit("loop.py: %s wants LABEL=BINARY, a new label and an executable (got %r)" % (opt, x))
            also[label] = os.path.abspath(binary)
            SIDES[label] = label + (", `checkpoint: false`" if opt == "--also-off" else "")
            if opt == "--also-off":
                also_off.add(label)
    # Jupyter last, so that the ratio columns follow the servers.
    sides = [s for s in sides if s != "jupyter"] + list(also) + [s for s in sides if s == "jupyter"]
    sizes = [int(x) for x in a.sizes.split(",") if x]
    cells = LOOP_CELLS * a.repeat
    modes = [m for m in [("think", a.think), ("b2b", 0.0)] if m[0] in a.modes.split(",")]
    if not modes:
        sys.exit("loop.py: --modes takes think, b2b or both")
    server_bin = os.path.abspath(a.server)
    if "jupyter" in sides:
        try:
            import jupyter_client  # noqa: F401
        except ImportError:
            sys.exit("loop.py: jupyter_client missing (make bench-setup)")
    import importlib.util
    missing = [m for m in ("scipy", "sklearn") if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit("loop.py: %s not installed (scripts/setup.sh --full)" % ", ".join(missing))

    work = tempfile.mkdtemp(prefix="psm-bench-loop-")
    os.chmod(work, 0o755)
    os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "config")
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    mplcfg = os.path.join(work, "mplconfig")
    os.makedirs(mplcfg)
    pyenv = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
             "MPLBACKEND": "Agg", "MPLCONFIGDIR": mplcfg, "OPENBLAS_NUM_THREADS": "1",
             "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
    skill_text = open(os.path.join(REPO, "SKILL.md"), encoding="utf-8").read()
    t_start, started = run.now(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = os.getloadavg()
    actors = {}
    # res[size][mode][side] = list over rounds of lists over cells (s)
    res = {n: {m: {s: [] for s in sides} for m, _ in modes} for n in sizes}
    setup_s = {n: {} for n in sizes}
    idle = {n: {} for n in sizes}  # each side's rest between two calls with think time, s
    cpu = {n: {m: {s: [] for s in sides} for m, _ in modes} for n in sizes}
    # expl[size][mode][side] = list over rounds of Ours.end()'s tuples
    expl = {n: {m: {s: [] for s in sides} for m, _ in modes} for n in sizes}
    loads = []
    try:
        for s in sides:
            root = os.path.join(work, s)
            os.makedirs(os.path.join(root, "workspace"))
            if s == "jupyter":
                actors[s] = Jup(pyenv, root)
                continue
            skill = None
            if s == "off" or s in also_off:
                # The built-in policy with checkpoints off: it only
                # tightens, so it needs no approval.
                if "checkpoint: true" not in skill_text:
                    sys.exit("loop.py: SKILL.md has no `checkpoint: true`")
                skill = os.path.join(root, "SKILL.md")
                with open(skill, "w", encoding="utf-8") as f:
                    f.write(skill_text.replace("checkpoint: true", "checkpoint: false"))
            elif a.skill:
                skill = os.path.abspath(a.skill)
                subprocess.run([server_bin, "--trust", "--yes", "--root", root, "--skill", skill],
                               check=True, stdout=subprocess.DEVNULL)
            actors[s] = Ours(also.get(s, server_bin), root, skill, os.path.join(work, s + ".err"))
        warm = None
        if not a.no_warm and "ours" in actors:
            run.log("warm `1+1` against the client floor")
            warm = ab.warm(os.path.join(os.path.abspath(a.floors), "floor_echo"), {
                s: actors[s].s for s in ("ours", "off") if s in actors}, rounds=max(a.rounds, 5))
        for n in sizes:
            run.log("agent loop: %d rows, sides %s" % (n, ", ".join(sides)))
            for s in sides:
                t0 = run.now()
                actors[s].reset(SETUP.format(n=n))
                setup_s[n][s] = run.now() - t0
                # Not timed: the first imports (scipy, sklearn) and the
                # first run of each cell, on every side.
                sequence(actors[s], LOOP_CELLS, 0.0)
            for s in sides:
                # What the zygote learned from those imports, it loads in
                # the background after the replies: let it finish before
                # the timed rounds, whose CPU time it would join.
                settle(actors[s].pid)
            for r in range(a.rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for mode, think in modes:
                    cpu0 = {s: tree_cpu_ms(actors[s].pid) for s in order}
                    for s in order:
                        actors[s].begin()
                    if think:
                        res_r = interleaved(actors, order, cells, think, idle[n])
                        for s in order:
                            res[n][mode][s].append(res_r[s])
                    else:
                        for s in order:
                            res[n][mode][s].append(sequence(actors[s], cells, 0.0))
                            # Its tail runs while the next side's sequence does.
                            if s != "jupyter":
                                actors[s].mark()
                    if think:
                        for s in order:
                            if s != "jupyter":
                                actors[s].mark()
                    # Work after the last reply (its checkpoint, its save)
                    # belongs to the sequence too: a save waits until the
                    # session has rested (at most SAVE_REST_S after the last
                    # call), and its CPU time is counted here.
                    time.sleep(max(think or 0.5, SAVE_REST_S))
                    for s in order:
                        if s != "jupyter":
                            settle(actors[s].pid, 30.0)
                    for s in order:
                        cpu[n][mode][s].append(tree_cpu_ms(actors[s].pid) - cpu0[s])
                        expl[n][mode][s].append(actors[s].end())
                    loads.append(os.getloadavg()[0])
                run.log("agent loop: %d rows, round %d of %d done (load %.2f)" % (n, r + 1, a.rounds,
                                                                                    os.getloadavg()[0]))
    finally:
        for x in actors.values():
            try:
                x.close()
            except Exception:  # noqa: BLE001 (the run's results still print)
                pass
        shutil.rmtree(work, ignore_errors=True)

    # ------------------------------------------------ report
    L = []
    load1 = os.getloadavg()
    L.append("### Agent loop: one session, one DataFrame, %d calls of %d kinds" % (len(cells), len(LOOP_CELLS)))
    L.append("")
    L.append("%s; nproc %d; load average before %s, during (1 min, after each round) %s, after %s; "
             "%d timed round%s per side, size and mode; with think time the sides take turns call by call "
             "(each idle at least %.1f s before each call), back to back each side runs its whole sequence "
             "(order reversed every other round); run took %.0f s%s." % (
                 started, os.cpu_count(), " ".join("%.2f" % x for x in load0),
                 "%.1f to %.1f" % (min(loads), max(loads)) if loads else "-",
                 " ".join("%.2f" % x for x in load1), a.rounds, "" if a.rounds == 1 else "s",
                 a.think, run.now() - t_start, " (--quick)" if a.quick else ""))
    rests = []
    for n in sizes:
        for s in sides:
            g = idle[n].get(s)
            if g and s != "jupyter":
                rests.append("%s, %s rows: median %.1f s, longest %.1f s, %d of %d over %.0f s" % (
                    SIDES[s], "{:,}".format(n), run.med(g), max(g), sum(1 for x in g if x > SAVE_IDLE_MIN_S),
                    len(g), SAVE_IDLE_MIN_S))
    if rests:
        L.append("With think time a side rests between two of its calls while the others take their turns: "
                 "%s. A saved session's state is saved once it has rested %.0f s (supervisor/savepace.h), so "
                 "the saves counted below with think time come from those longer rests (and one after each "
                 "sequence), not from the think time itself." % ("; ".join(rests), SAVE_IDLE_MIN_S))
        L.append("")
    L.append("Sum: the sum of the %d call latencies of a sequence (median over rounds); median: the median "
             "call over every call of every round. Ratios are Jupyter's time over ours: above 1, ours is "
             "faster." % len(cells))
    L.append("")
    head = "| rows | mode | " + " | ".join("%s: sum, median call" % SIDES[s] for s in sides)
    ratio_cols = [s for s in sides if s != "jupyter"] if "jupyter" in sides else []
    head += "".join(" | Jupyter / %s: sums, medians" % SIDES[s] for s in ratio_cols) + " |"
    L.append(head)
    L.append("|---:|---|" + "---:|" * (len(sides) + len(ratio_cols)))
    measured = {}
    for n in sizes:
        for mode, think in modes:
            sums, meds = {}, {}
            for s in sides:
                rounds_ = res[n][mode][s]
                sums[s] = run.med([sum(x) for x in rounds_]) * 1000 if rounds_ else float("nan")
                meds[s] = run.med([v for x in rounds_ for v in x]) * 1000 if rounds_ else float("nan")
            row = "| %s | %s | " % ("{:,}".format(n), "think %.1f s" % think if think else "back to back")
            row += " | ".join("%s ms, %s ms" % (fmt(sums[s]), fmt(meds[s])) for s in sides)
            for s in ratio_cols:
                rs, rm = sums["jupyter"] / sums[s], meds["jupyter"] / meds[s]
                row += " | %.2f×, %.2f×" % (rs, rm)
                if s == "ours":
                    measured["%d/%s" % (n, mode)] = {"sum_ratio": rs, "median_ratio": rm,
                                                     "ours_sum_ms": sums[s], "jupyter_sum_ms": sums["jupyter"],
                                                     "ours_median_ms": meds[s],
                                                     "jupyter_median_ms": meds["jupyter"]}
            L.append(row + " |")
    L.append("")
    L.append("CPU time per call, all processes of each side (the server, zygote, session, checkpoints, savers; "
             "the kernel and its children), median over rounds, ms: it moves less with the machine's load "
             "than the latencies, and says where the time goes:")
    L.append("")
    L.append("| rows | mode | " + " | ".join(SIDES[s] for s in sides) + " |")
    L.append("|---:|---|" + "---:|" * len(sides))
    for n in sizes:
        for mode, think in modes:
            L.append("| %s | %s | %s |" % ("{:,}".format(n), "think %.1f s" % think if think else "back to back",
                                           " | ".join(fmt(run.med(cpu[n][mode][s]) / len(cells))
                                                      if cpu[n][mode][s] else "-" for s in sides)))
    L.append("")
    servers = [s for s in sides if s != "jupyter"]
    explained = {}
    if servers:
        L.append("Where a server side's CPU goes, per call (ms, median over rounds): the session's own time "
                 "within calls (request sent to reply read) and after replies (its checkpoint's fork, the pages "
                 "it copies after it), the rest of the tree below the server (checkpoints, savers, warm-up "
                 "probes, live or reaped), the zygote's and the server's own; of all that, what came after the "
                 "sequence's last reply (its last checkpoint, the save once the session rests); the session's "
                 "minor faults per call, within calls and after; the calls after which the server forked a "
                 "checkpoint (its debug verdict, `--log-level debug`) and why, and its saves (all rounds: whole "
                 "saves at rest, of them \"after logged cells only\", those that follow only cells the replay log "
                 "logged since the last whole save, which a journal of those cells could have stood for; and the "
                 "saves written as a journal of cells, bench/CHECKPOINTS.md). "
                 "Jupyter's row: the kernel's own time and faults within calls, and its whole tree:")
        L.append("")
        L.append("| rows | mode | side | forked after | saves | %s | all | of which after the last reply | "
                 "minor faults: in calls, after |" % " | ".join(label for _, label in PARTS))
        L.append("|---:|---|---|---|---:|" + "---:|" * (len(PARTS) + 3))
    for n in sizes:
        for mode, think in modes:
            jg = expl[n][mode].get("jupyter")
            if servers and jg:
                jc = run.med(cpu[n][mode]["jupyter"]) / len(cells)
                L.append("| %s | %s | Jupyter | - | - | %s | - | - | - | - | %s | - | %.0f, - |" % (
                    "{:,}".format(n), "think %.1f s" % think if think else "back to back",
                    fmt(run.med([g[0] for g in jg]) / len(cells)), fmt(jc),
                    run.med([g[1] for g in jg]) / len(cells)))
            for s in servers:
                got = expl[n][mode][s]
                if not got:
                    continue
                per = {k: run.med([g[0][k] for g in got]) / len(cells) for k, _ in PARTS + (("all", ""),)}
                per["tail"] = {k: run.med([g[0]["tail"][k] for g in got]) / len(cells)
                               for k in ("below", "server", "all")}
                faults = [run.med([g[1][i] for g in got]) / len(cells) for i in (0, 1)]
                verdicts = [v for g in got for v in g[2]]
                why = {}
                for v in verdicts:
                    if v != "log":
                        r = v[len("fork: "):] if v.startswith("fork: ") else v
                        why[r] = why.get(r, 0) + 1
                forks = sum(why.values())
                saves = {k: sum(g[3].get(k, 0) for g in got) for k in [k for k, _ in SAVES] + ["bytes", "ms", "written", "journal"]}
                whole_saved = saves["saved"] - saves["journals"]
                kinds = {}
                for g in got:
                    if len(g[2]) != len(cells):
                        continue
                    for j, v in enumerate(g[2]):
                        k = kinds.setdefault(cells[j][0], [0, 0, set()])
                        k[1] += 1
                        if v != "log":
                            k[0] += 1
                            k[2].add(v[len("fork: "):])
                forked = "%d of %d calls%s" % (forks, len(cells) * len(got), (": " + ", ".join(
                    "%s %d" % (r, c) for r, c in sorted(why.items(), key=lambda x: -x[1]))) if why else "")
                if not verdicts:
                    forked = ("no verdict logged: checkpoints off" if s == "off" or s in also_off else
                              "no verdict logged (a build without the replay log forks after every call)")
                L.append("| %s | %s | %s | %s | %d whole (%d saved%s%s)%s | %s | %s | %s (below %s, server %s) "
                         "| %.0f, %.0f |" % (
                             "{:,}".format(n), "think %.1f s" % think if think else "back to back", SIDES[s],
                             forked, saves["saves"], whole_saved,
                             ", %.0f MB in %.0f ms, %.0f MB written" % (saves["bytes"] / 1e6, saves["ms"], saves.get("written", 0) / 1e6)
                             if whole_saved else "",
                             "; %d after logged cells only" % saves["journal"] if saves["saves"] else "",
                             ", %d as a journal of cells" % saves["journals"] if saves["journals"] else "",
                             " | ".join(fmt(per[k]) for k, _ in PARTS), fmt(per["all"]),
                             fmt(per["tail"]["all"]), fmt(per["tail"]["below"]), fmt(per["tail"]["server"]),
                             faults[0], faults[1]))
                if kinds:
                    explained.setdefault("kinds", []).append("%s, %s, %s: forked after %s." % (
                        "{:,}".format(n), "think" if think else "back to back", SIDES[s], ", ".join(
                            "%s %d/%d (%s)" % (k, v[0], v[1], "; ".join(sorted(v[2])))
                            for k, v in kinds.items() if v[0]) or "none"))
                if s == "ours":
                    jc = cpu[n][mode].get("jupyter")
                    explained["%d/%s" % (n, mode)] = {
                        "calls": len(cells) * len(got), "forks": forks, "why": why,
                        "saves": saves["saves"], "journal_saves": saves["journal"], "journals": saves["journals"],
                        "saved_mb": saves["bytes"] / 1e6, "save_ms": saves["ms"],
                        "cpu_ms": per, "faults": faults,
                        "jupyter_cpu_ms": run.med(jc) / len(cells) if jc else None,
                        "jupyter_kernel_call_ms": run.med([g[0] for g in jg]) / len(cells) if jg else None,
                        "jupyter_faults": run.med([g[1] for g in jg]) / len(cells) if jg else None}
    if servers:
        L.append("")
        L += explained.pop("kinds", [])
        L.append("")
        L.append("Per cell, each server side's session (and Jupyter's kernel) within the call: its own CPU time "
                 "(ms) and minor faults (thousands), median over rounds and runs of each kind, think time / back "
                 "to back; beside the latency (ms) below, it says whether a slow call worked or waited:")
        L.append("")
        percell = servers + [s for s in sides if s == "jupyter"]
        L.append("| rows | cell | " + " | ".join("%s: CPU, faults" % SIDES[s] for s in percell) + " |")
        L.append("|---:|---|" + "---:|" * len(percell))
        for n in sizes:
            for i, (kind, _) in enumerate(LOOP_CELLS):
                idx = [j for j in range(len(cells)) if j % len(LOOP_CELLS) == i]
                bits = []
                for s in percell:
                    c, f = [], []
                    for mode, _ in modes:
                        xs = [g[-1][j] for g in expl[n][mode][s] for j in idx
                              if len(g[-1]) == len(cells) and g[-1][j]]
                        c.append(fmt(run.med([x[0] for x in xs])) if xs else "-")
                        f.append("%.1fk" % (run.med([x[1] for x in xs]) / 1000.0) if xs else "-")
                    bits.append("%s, %s" % (" / ".join(c), " / ".join(f)))
                L.append("| %s | %s | %s |" % ("{:,}".format(n), kind, " | ".join(bits)))
        L.append("")
    L.append("Per cell, median over rounds and over both runs of each kind in a sequence (ms), think time "
             "then back to back; the setup (building the frame, not timed above) last:")
    L.append("")
    L.append("| rows | cell | " + " | ".join("%s, think / b2b" % SIDES[s] for s in sides) + " |")
    L.append("|---:|---|" + "---:|" * len(sides))
    for n in sizes:
        for i, (kind, _) in enumerate(LOOP_CELLS):
            idx = [j for j in range(len(cells)) if j % len(LOOP_CELLS) == i]
            bits = []
            for s in sides:
                v = []
                for mode, _ in modes:
                    xs = [x[j] * 1000 for x in res[n][mode][s] for j in idx]
                    v.append(fmt(run.med(xs)) if xs else "-")
                bits.append(" / ".join(v))
            L.append("| %s | %s | %s |" % ("{:,}".format(n), kind, " | ".join(bits)))
        L.append("| %s | (setup) | %s |" % ("{:,}".format(n), " | ".join(
            fmt(setup_s[n].get(s, float("nan")) * 1000) for s in sides)))
    abm = {}
    L += ab_report(res, cpu, expl, cells, sizes, modes, warm, abm)
    if abm.get("ab"):
        abm["ab"]["think_s"] = a.think
    if measured:
        load_note = "load %.1f to %.1f" % (min(loads), max(loads)) if loads else ""
        measured["load"] = load_note
        measured["think_s"] = a.think
        measured["explained"] = explained
        if a.targets:
            targets.record(a.targets, "loop", measured)
        L.append("")
        L += targets.table(targets.loop_rows({"loop": measured}))
        L += targets.loop_explained({"loop": measured})
    if abm.get("ab"):
        if a.targets:
            targets.record(a.targets, "ab", abm["ab"])
        L.append("")
        L += targets.table(targets.ab_rows(abm))
        L += targets.ab_explained(abm)
    targets.emit(L, a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
