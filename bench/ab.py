#!/usr/bin/python3
"""Checkpoints on against checkpoints off, measured against each other.

On a shared machine the load moves absolute times by 2x from one minute to
the next, so a verdict "on is within 3 % of off" only survives if on and
off run side by side: here every figure is a pair (one on, one off, taken
in the same round, the order flipped every other round), each pair gives
one ratio, and the verdict is on the median of at least 5 ratios, printed
with their spread (the lowest and highest) so that a reader sees whether
the median means anything.

Used by bench/loop.py (the agent loop's rounds) and runnable alone for the
warm call:

    bench/ab.py --server build/python-sandbox-mcp --floors build/bench [--rounds 7] [--off]
        [--also before=/path/to/another/build]

prints `1+1` back to back and after 100 ms of think time, checkpoints on
and off, against this client's floor (bench/floor_echo.c: the same client
against a process that answers each line with a canned result), in
interleaved rounds.  Nothing here asserts a time.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
from warm import SPLIT, cpu_split  # noqa: E402  (each process's CPU, schedstat)

# The targets: checkpoints on within 3 % of off (sum of latencies and CPU
# per call); a warm `1+1` within 3x of the client floor.
ON_OFF_MAX = 1.03
WARM_MAX = 3.0


def pairs(on, off):
    """The ratios on/off of paired figures (None where either is missing
    or off is zero)."""
    return [a / b for a, b in zip(on, off) if a is not None and b]


def spread(ratios):
    """(median, lowest, highest) of ratios, or None when empty."""
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def fmt_spread(s, unit="×"):
    if not s:
        return "-"
    return "%.3f%s [%.3f to %.3f]" % (s[0], unit, s[1], s[2])


def verdict(s, limit):
    """True (PASS), False (MISS) or None (too few pairs to say)."""
    if not s:
        return None
    return s[0] <= limit


# ------------------------------------------------------------ warm `1+1`

def timed(execute, n, think, client_ns=None):
    """n calls of `1+1` (after think s of sleep each); with client_ns, a
    list, appends the CPU this thread spent in each call."""
    xs = []
    for _ in range(n):
        if think:
            time.sleep(think)
        c0 = time.thread_time_ns()
        t0 = run.now()
        execute("1+1")
        xs.append(run.now() - t0)
        if client_ns is not None:
            client_ns.append(time.thread_time_ns() - c0)
    return xs


def warm(floor_bin, servers, rounds=7, b2b=200, thought=15, think=0.1):
    """servers: {label: Server (initialized, its default session warm)}.
    Each round times the floor, then every server (order flipped every
    other round), back to back (b2b calls) and after `think` s of sleep
    (thought calls); returns {mode: {label: [median of each round, s]}}
    with the floor under "floor", and under "cpu" {mode: {label: [{part:
    µs per call}, one per round]}}: each process's CPU (warm.py's split;
    the floor's, the client's alone)."""
    with tempfile.TemporaryDirectory(prefix="psm-bench-floor-") as d:
        e = run.Server(floor_bin, d)
        e.initialize()
        actors = dict({"floor": e.execute}, **{k: v.execute for k, v in servers.items()})
        for x in actors.values():  # warm-up
            timed(x, 50, 0.0)
        out = {m: {k: [] for k in actors} for m in ("b2b", "think")}
        out["cpu"] = {m: {k: [] for k in actors} for m in ("b2b", "think")}
        names = list(actors)

        def one(k, mode, n, t):
            client = []
            c0 = cpu_split(servers[k]) if k in servers else None
            out[mode][k].append(run.med(timed(actors[k], n, t, client)))
            per = {"client": sum(client) / n / 1000.0}
            if c0 is not None:
                c1 = cpu_split(servers[k])
                per.update({p: (c1[p] - c0[p]) / n / 1000.0 for p in SPLIT if p != "client"})
            out["cpu"][mode][k].append(per)

        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            for k in order:
                one(k, "b2b", b2b, 0.0)
            for k in order:
                one(k, "think", thought, think)
        e.close()
    return out


def cpu_medians(rounds):
    """{part: median µs per call} of warm()'s per-round CPU split."""
    parts = rounds[0].keys() if rounds else ()
    return {p: run.med([r[p] for r in rounds]) for p in parts}


def warm_lines(out, think=0.1):
    """Markdown lines and {target: (spread, measured text, CPU split, the
    floor's CPU split)} for warm()'s result (the splits: cpu_medians)."""
    L = ["| `1+1` | " + " | ".join(k for k in out["b2b"]) + " | " +
         " | ".join("%s / floor: median [spread]" % k for k in out["b2b"] if k != "floor") + " |",
         "|---|" + "---:|" * (2 * len(out["b2b"]) - 1)]
    rows = {}
    for mode, label in (("b2b", "back to back"), ("think", "after %g ms think" % (think * 1000))):
        o = out[mode]
        cells = ["%.0f us" % (run.med(o[k]) * 1e6) for k in o]
        for k in o:
            if k == "floor":
                continue
            s = spread(pairs(o[k], o["floor"]))
            cells.append(fmt_spread(s))
            rows["%s/%s" % (k, mode)] = (s, "%.0f us against the floor's %.0f us" % (
                run.med(o[k]) * 1e6, run.med(o["floor"]) * 1e6),
                cpu_medians(out.get("cpu", {}).get(mode, {}).get(k, [])),
                cpu_medians(out.get("cpu", {}).get(mode, {}).get("floor", [])))
        L.append("| %s | %s |" % (label, " | ".join(cells)))
    cpu = out.get("cpu")
    if cpu:
        L += ["", "CPU per call of each process (schedstat, median of the rounds; the floor's is its client's; "
              "after think, what ran in the think time, the checkpoint after a call, counts in the call's):", "",
              "| `1+1` | " + " | ".join(SPLIT) + " |", "|---|" + "---:|" * len(SPLIT)]
        for mode, label in (("b2b", "back to back"), ("think", "after %g ms think" % (think * 1000))):
            for k, rounds in cpu[mode].items():
                m = cpu_medians(rounds)
                L.append("| %s, %s | %s |" % (k, label, " | ".join(
                    "%.0f us" % m[p] if p in m else "-" for p in SPLIT)))
    return L, rows



# ------------------------------------------------------------ the agent loop

def loop_pairs(res, cpu, n_calls, sizes, modes):
    """From bench/loop.py's per-round figures (res[n][mode][side]: lists of
    call latencies; cpu[n][mode][side]: the tree's CPU ms of each round),
    {"N/mode": {"sum": spread, "cpu": spread, "pairs": k, "on_sum_ms",
    "off_sum_ms", "on_cpu_ms", "off_cpu_ms"}} of ours / off."""
    out = {}
    for n in sizes:
        for mode, _ in modes:
            on, off = res[n][mode].get("ours"), res[n][mode].get("off")
            if not on or not off:
                continue
            son, soff = [sum(x) for x in on], [sum(x) for x in off]
            con, coff = cpu[n][mode]["ours"], cpu[n][mode]["off"]
            out["%d/%s" % (n, mode)] = {
                "sum": spread(pairs(son, soff)), "cpu": spread(pairs(con, coff)),
                "pairs": min(len(son), len(soff)),
                "on_sum_ms": run.med(son) * 1000, "off_sum_ms": run.med(soff) * 1000,
                "on_cpu_ms": run.med(con) / n_calls, "off_cpu_ms": run.med(coff) / n_calls}
    return out


def loop_kinds(res, expl, cells, kinds, n, mode):
    """Where on's time differs from off's, per kind of cell, at one size
    and mode: rows (kind, latency on - off ms, session CPU on - off ms,
    session minor faults on - off, calls of that kind on forked after,
    calls of that kind), medians over the paired rounds and both runs of
    each kind in a sequence."""
    on, off = res[n][mode].get("ours") or [], res[n][mode].get("off") or []
    eon, eoff = expl[n][mode].get("ours") or [], expl[n][mode].get("off") or []
    rows = []
    for i, kind in enumerate(kinds):
        idx = [j for j in range(len(cells)) if j % len(kinds) == i]
        dl = [(a[j] - b[j]) * 1000 for a, b in zip(on, off) for j in idx]
        dc, df = [], []
        for a, b in zip(eon, eoff):
            for j in idx:
                x = a[-1][j] if j < len(a[-1]) else None
                y = b[-1][j] if j < len(b[-1]) else None
                if x and y:
                    dc.append(x[0] - y[0])
                    df.append(x[1] - y[1])
        forked = sum(1 for g in eon if len(g[2]) == len(cells) for j in idx if g[2][j] != "log")
        seen = sum(1 for g in eon if len(g[2]) == len(cells) for j in idx)
        rows.append((kind, run.med(dl) if dl else float("nan"), run.med(dc) if dc else float("nan"),
                     run.med(df) if df else float("nan"), forked, seen))
    return rows


def loop_parts(expl, n, mode, n_calls, parts):
    """{part: on's CPU ms per call - off's} (bench/loop.py's PARTS), medians
    over rounds."""
    eon, eoff = expl[n][mode].get("ours") or [], expl[n][mode].get("off") or []
    if not eon or not eoff:
        return {}
    return {k: (run.med([g[0][k] for g in eon]) - run.med([g[0][k] for g in eoff])) / n_calls
            for k, _ in parts}


def loop_lines(ab, kinds_by, parts_by, part_labels, min_pairs=5):
    """Markdown: the pair table, then for each size and mode on - off by
    part and by kind of cell."""
    L = ["Checkpoints on (the built-in policy) against `checkpoint: false`, pair by pair: each round "
         "gives one pair (the two sides took turns call by call with think time, sequence by sequence back "
         "to back, the order flipped every other round); the ratio on / off of each pair, the median of the "
         "pairs and, in brackets, the lowest and highest pair. Target: on within %d %% of off (median "
         "<= %.2f) in the sum of latencies and in CPU per call, from %d pairs." % (
             round((ON_OFF_MAX - 1) * 100), ON_OFF_MAX, min_pairs), "",
         "| rows | mode | pairs | sum on, off (ms) | sum on / off | CPU per call on, off (ms) | CPU on / off |",
         "|---:|---|---:|---:|---:|---:|---:|"]
    for key, v in ab.items():
        n, mode = key.split("/")
        L.append("| %s | %s | %d | %.0f, %.0f | %s | %.1f, %.1f | %s |" % (
            "{:,}".format(int(n)), "think" if mode == "think" else "back to back", v["pairs"],
            v["on_sum_ms"], v["off_sum_ms"], fmt_spread(v["sum"]), v["on_cpu_ms"], v["off_cpu_ms"],
            fmt_spread(v["cpu"])))
    L.append("")
    for key in ab:
        n, mode = key.split("/")
        parts = parts_by.get(key) or {}
        L.append("Where on - off goes, %s rows, %s: CPU per call by process (ms): %s." % (
            "{:,}".format(int(n)), "think" if mode == "think" else "back to back",
            ", ".join("%s %+.1f" % (part_labels[k], v) for k, v in parts.items()) or "-"))
        L.append("")
        L.append("| cell | latency on - off (ms) | session CPU in the call on - off (ms) | "
                 "session minor faults on - off | on forked after |")
        L.append("|---|---:|---:|---:|---:|")
        for kind, dl, dc, df, forked, seen in kinds_by.get(key, []):
            L.append("| %s | %+.1f | %+.1f | %+.0f | %d of %d |" % (kind, dl, dc, df, forked, seen))
        L.append("")
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--floors", default="build/bench", help="where floor_echo is")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--off", action="store_true", help="also a server with `checkpoint: false`")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY",
                    help="one more server: another build, under the built-in policy (repeatable)")
    a = ap.parse_args()
    builds = {"on": os.path.abspath(a.server)}
    for x in a.also:
        label, sep, binary = x.partition("=")
        if not sep or label in ("on", "off", "floor") or not os.access(binary, os.X_OK):
            sys.exit("ab.py: --also wants LABEL=BINARY, a new label and an executable (got %r)" % x)
        builds[label] = os.path.abspath(binary)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="psm-bench-warm-")
    os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "config")
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    servers = {}
    try:
        for s in list(builds) + (["off"] if a.off else []):
            root = os.path.join(work, s)
            os.makedirs(os.path.join(root, "workspace"))
            skill = None
            if s == "off":
                text = open(os.path.join(repo, "SKILL.md"), encoding="utf-8").read()
                skill = os.path.join(root, "SKILL.md")
                with open(skill, "w", encoding="utf-8") as f:
                    f.write(text.replace("checkpoint: true", "checkpoint: false"))
            servers[s] = run.Server(builds.get(s, builds["on"]), root, skill,
                                    stderr_path=os.path.join(work, s + ".err"))
            servers[s].initialize(timeout=120)
            servers[s].execute("1+1", timeout=120)
        out = warm(os.path.join(os.path.abspath(a.floors), "floor_echo"), servers, rounds=a.rounds)
        L, rows = warm_lines(out)
        print("load %s" % " ".join("%.2f" % x for x in os.getloadavg()))
        print("\n".join(L))
        for k, (s, txt, _, _) in rows.items():
            ok = verdict(s, WARM_MAX)
            print("%s: %s, %s -> %s" % (k, fmt_spread(s), txt, "PASS" if ok else "MISS"))
    finally:
        for x in servers.values():
            x.close()
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
