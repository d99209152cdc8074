#!/usr/bin/python3
"""The protection targets of `make bench` in one table, PASS or MISS.

Every protection on by default (checkpoints, saved sessions, the jail), each
target a ratio measured side by side in one run:

- the agent loop (bench/loop.py) at least 1.1x Jupyter with 1 s of think
  time and 1.0x back to back, at 400k and 4M rows (sums of call latencies);
- the 4M-row median call at least 1.0x Jupyter's;
- the 44 agent tasks (bench/agent.py) at least 1.0x Jupyter;
- the 1 GiB rewrite (bench/run.py, section 6) within 2x of checkpoints off;
- 50 agents at once (bench/agent.py's scale rows) at least 0.8x Jupyter's
  tasks per second, with a total PSS at most half of Jupyter's;
- a fresh session's first import of modules not yet learned (bench/warmup.py)
  within 1.1x of a fresh kernel's;
- checkpoints on within 3 % of checkpoints off in the agent loop (sum of
  latencies and CPU per call, median of at least 5 interleaved pairs), and a
  warm `1+1` within 3x of the client floor (bench/ab.py, run by loop.py).

Each script records what it measured with `--targets FILE` (one JSON object,
a key per script, rewritten whole each time); `make bench` removes the file
first and ends with `bench/targets.py --targets FILE`, which prints the
table (and appends it to --results), and under it, for the agent loop, what
explains its figures: the calls that forked a checkpoint and why, and where
the CPU per call went, process by process.  A target whose script did not run,
or ran too small (the scale rows below 50 agents), says so: n/a.
"""
import argparse
import json
import os
import sys
import time


def record(path, key, value):
    """Sets data[key] = value in the JSON file at path."""
    data = load(path)
    data[key] = value
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _x(v):
    return "%.2f×" % v


def loop_rows(data):
    """(target, measured, wanted, ok) for the agent loop."""
    rows = []
    lp = data.get("loop") or {}
    note = (" (%s)" % lp["load"]) if lp.get("load") else ""
    think = "%g s think" % lp.get("think_s", 1.0)
    for n, label in (("400000", "400k"), ("4000000", "4M")):
        for mode, want, wl in (("think", 1.1, think), ("b2b", 1.0, "back to back")):
            m = lp.get("%s/%s" % (n, mode))
            what = "agent loop, %s rows, %s: Jupyter's sum / ours" % (label, wl)
            if not m:
                rows.append((what, "not measured (make bench-loop)", "≥ %.1f×" % want, None))
                continue
            rows.append((what, "%s (ours %.0f ms, Jupyter %.0f ms)%s" % (
                _x(m["sum_ratio"]), m["ours_sum_ms"], m["jupyter_sum_ms"], note),
                "≥ %.1f×" % want, m["sum_ratio"] >= want))
    ms = [lp.get("4000000/think"), lp.get("4000000/b2b")]
    what = "agent loop, 4M rows: Jupyter's median call / ours (think, back to back)"
    if all(ms):
        rows.append((what, "%s, %s (ours %.0f / %.0f ms, Jupyter %.0f / %.0f ms)" % (
            _x(ms[0]["median_ratio"]), _x(ms[1]["median_ratio"]), ms[0]["ours_median_ms"],
            ms[1]["ours_median_ms"], ms[0]["jupyter_median_ms"], ms[1]["jupyter_median_ms"]),
            "≥ 1.0×", min(m["median_ratio"] for m in ms) >= 1.0))
    else:
        rows.append((what, "not measured (make bench-loop)", "≥ 1.0×", None))
    return rows


def loop_explained(data):
    """Lines under the table: where ours' time goes in the agent loop (the
    calls that forked a checkpoint and why, the CPU per call by process),
    as bench/loop.py measured it."""
    lp = data.get("loop") or {}
    ex = lp.get("explained") or {}
    out = []
    for n, label in (("400000", "400k"), ("4000000", "4M")):
        for mode, wl in (("think", "%g s think" % lp.get("think_s", 1.0)), ("b2b", "back to back")):
            e = ex.get("%s/%s" % (n, mode))
            if not e:
                continue
            c = e["cpu_ms"]
            why = ", ".join("%s %d" % (r, k) for r, k in sorted(e["why"].items(), key=lambda x: -x[1]))
            tail = c.get("tail") or {}
            jup = ""
            if e.get("jupyter_cpu_ms"):
                jup = "; Jupyter's %.0f ms" % e["jupyter_cpu_ms"]
                if e.get("jupyter_kernel_call_ms") is not None:
                    jup += " (the kernel %.0f in calls, %.0f minor faults per call)" % (
                        e["jupyter_kernel_call_ms"], e["jupyter_faults"])
            saved = ""
            if e.get("save_ms"):
                journal = ("; %d of them after logged cells only, which a journal could stand for" % e["journal_saves"]
                           if "journal_saves" in e else "")
                saved = " (%.0f MB in %.0f ms%s)" % (e["saved_mb"], e["save_ms"], journal)
            if e.get("journals"):
                saved += " and %d as a journal of cells" % e["journals"]
            out.append("- agent loop, %s rows, %s, explained by: forked after %d of %d calls%s; %d whole save%s%s; "
                       "CPU per call %.0f ms = session %.0f in calls + %.0f after replies, checkpoints and "
                       "savers %.0f, zygote %.0f, server %.0f (%.0f of it after the last reply: the last "
                       "checkpoint and the save at rest)%s; the session's minor faults per call %.0f in "
                       "calls, %.0f after." % (
                           label, wl, e["forks"], e["calls"], " (%s)" % why if why else "", e["saves"],
                           "" if e["saves"] == 1 else "s",
                           saved,
                           c["all"], c["call"], c["after"], c["below"],
                           c["zygote"], c["server"], tail.get("all", float("nan")), jup,
                           e["faults"][0], e["faults"][1]))
    return [""] + out if out else []


def other_rows(data):
    rows = []
    su = data.get("suite")
    for key, label in (("fresh", "fresh session per task against `%reset -f`"),
                       ("one", "one session against one kernel")):
        what = "the %s agent tasks, %s: Jupyter's time / ours" % (su.get("tasks", 44) if su else 44, label)
        if not su or key not in su:
            rows.append((what, "not measured (make bench-agent)", "≥ 1.0×", None))
            continue
        r = su[key]
        rows.append((what, "%s (ours %.0f ms, Jupyter %.0f ms)" % (_x(r["jupyter_ms"] / r["ours_ms"]),
                                                                  r["ours_ms"], r["jupyter_ms"]),
                     "≥ 1.0×", r["jupyter_ms"] / r["ours_ms"] >= 1.0))
    rw = data.get("rewrite")
    what = "1 GiB rewritten (`a += 1`): checkpoints on / off (1 s think, back to back)"
    if rw:
        worst = max(rw["think"], rw["b2b"])
        rows.append((what, "%s, %s" % (_x(rw["think"]), _x(rw["b2b"])), "≤ 2.0×", worst <= 2.0))
    else:
        rows.append((what, "not measured (make bench)", "≤ 2.0×", None))
    sc = data.get("scale")
    for key, label, want, cmp in (("tasks_ratio", "tasks per second: ours / Jupyter's", "≥ 0.8×",
                                   lambda v: v >= 0.8),
                                  ("pss_ratio", "total PSS: ours / Jupyter's", "≤ 0.5×", lambda v: v <= 0.5)):
        what = "50 agents at once, %s" % label
        if not sc:
            rows.append((what, "not measured (make bench-scale)", want, None))
        elif sc["n"] < 50:
            rows.append((what, "%s at N=%d only" % (_x(sc[key]), sc["n"]), want, None))
        else:
            rows.append((what, _x(sc[key]), want, cmp(sc[key])))
    fi = data.get("first_import")
    what = "a fresh session's first `import %s`, nothing learned: ours / a fresh kernel's" % (
        fi["modules"] if fi else "scipy.stats, sklearn.linear_model")
    if fi:
        rows.append((what, "%s (ours %.0f ms, kernel %.0f ms)" % (_x(fi["ratio"]), fi["ours_ms"], fi["kernel_ms"]),
                     "≤ 1.1×", fi["ratio"] <= 1.1))
    else:
        rows.append((what, "not measured (make bench-warmup, needs scipy and scikit-learn)", "≤ 1.1×", None))
    return rows



def _spread(s):
    return "%.3f× [%.3f to %.3f]" % tuple(s) if s else "-"


def ab_rows(data, min_pairs=5):
    """(target, measured, wanted, ok) for checkpoints on against off in the
    agent loop and the warm call against the client floor (bench/ab.py's
    pairs, recorded by bench/loop.py under "ab")."""
    ab = data.get("ab") or {}
    rows = []
    sizes = sorted({k.split("/")[0] for k in ab.get("loop") or {}} | {"400000", "4000000"}, key=int)
    for n, label in ((n, {"400000": "400k", "4000000": "4M"}.get(n, "{:,}".format(int(n)))) for n in sizes):
        for mode, wl in (("think", "%g s think" % ab.get("think_s", 1.0)), ("b2b", "back to back")):
            v = (ab.get("loop") or {}).get("%s/%s" % (n, mode))
            for what, key in (("sum of latencies", "sum"), ("CPU per call", "cpu")):
                t = "agent loop, %s rows, %s: checkpoints on / off, %s (median of pairs [spread])" % (
                    label, wl, what)
                if not v or not v.get(key):
                    rows.append((t, "not measured (make bench-loop)", "≤ 1.03×", None))
                    continue
                ok = v[key][0] <= 1.03 if v["pairs"] >= min_pairs else None
                rows.append((t, "%s, %d pairs%s" % (_spread(v[key]), v["pairs"],
                                                     "" if ok is not None else " (too few for a verdict)"),
                             "≤ 1.03×", ok))
    for mode, wl in (("b2b", "back to back"), ("think", "after 100 ms think")):
        v = (ab.get("warm") or {}).get("ours/%s" % mode)
        t = "warm `1+1`, %s: ours / the client floor (median of rounds [spread])" % wl
        if not v:
            rows.append((t, "not measured (make bench-loop)", "≤ 3×", None))
            continue
        rows.append((t, "%s: %s" % (_spread(v["ratio"]), v["text"]), "≤ 3×", v["ratio"][0] <= 3.0))
    return rows


def ab_explained(data):
    """One line per MISS of ab_rows: where the difference goes, from the
    run's own tables."""
    ab = data.get("ab") or {}
    out = []
    for key, v in sorted((ab.get("loop") or {}).items()):
        miss = [k for k in ("sum", "cpu") if v.get(k) and v[k][0] > 1.03]
        if not miss:
            continue
        n, mode = key.split("/")
        head = "MISS" if v["pairs"] >= 5 else "over 3 %% in %d pairs (too few for a verdict)" % v["pairs"]
        kinds = sorted(ab.get("kinds", {}).get(key, []), key=lambda r: -(r[1] if r[1] == r[1] else 0))
        parts = ab.get("parts", {}).get(key, {})
        out.append("- %s, agent loop %s rows %s (%s): on costs %+.0f ms of latency per sequence and %+.1f ms "
                   "of CPU per call more than off; by process, per call: %s; the cells that add most latency: %s." % (
                       head, "{:,}".format(int(n)), "with think time" if mode == "think" else "back to back",
                       " and ".join({"sum": "latency", "cpu": "CPU"}[k] for k in miss),
                       v["on_sum_ms"] - v["off_sum_ms"], v["on_cpu_ms"] - v["off_cpu_ms"],
                       ", ".join("%s %+.1f ms" % (k, x) for k, x in sorted(parts.items(), key=lambda p: -p[1])),
                       "; ".join("%s %+.0f ms (session CPU %+.0f ms, %+.0f faults, forked after %d of %d)" % tuple(r)
                                 for r in kinds[:4])))
    w = ab.get("warm") or {}
    for mode, wl in (("b2b", "back to back"), ("think", "after 100 ms think")):
        v, o = w.get("ours/%s" % mode), w.get("off/%s" % mode)
        if not v or v["ratio"][0] <= 3.0:
            continue
        cpu = v.get("cpu") or {}
        split = ", ".join("%s %.0f µs" % (p, x) for p, x in cpu.items() if x >= 1)
        out.append("- MISS, warm `1+1` %s: %s; with checkpoints off %s, so %s of the excess over 3× the floor "
                   "is the call path itself (server, its threads, the session's round trip), not the checkpoint.%s" % (
                       wl, v["text"], o["text"] if o else "not measured",
                       "all" if o and o["ratio"][0] > 3.0 else "not all",
                       (" CPU per call: %s; the floor's client %.0f µs (`make bench-warm WARM_ARGS=--phases` "
                        "splits the server's by phase)." % (split, (v.get("floor_cpu") or {}).get("client", 0)))
                       if split else ""))
    return [""] + out if out else []


def table(rows):
    out = ["| target (every protection on) | measured | target | |", "|---|---|---|---|"]
    for label, measured, want, ok in rows:
        out.append("| %s | %s | %s | %s |" % (label, measured, want,
                                              "n/a" if ok is None else "PASS" if ok else "MISS"))
    return out


def emit(lines, results):
    """Prints the report and appends it to the results file, if one is named."""
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if results:
        with open(results, "a") as f:
            f.write("\n" + text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", required=True, help="the JSON file the bench scripts recorded into")
    ap.add_argument("--results", help="append the table (markdown) here too")
    a = ap.parse_args()
    data = load(a.targets)
    load1 = os.getloadavg()
    L = ["### Protection that costs nothing: the targets of this run", "",
         "%s; load average at the end %s; each ratio measured side by side in its own section above." % (
             time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), " ".join("%.2f" % x for x in load1)), ""]
    L += table(loop_rows(data) + ab_rows(data) + other_rows(data))
    L += loop_explained(data)
    L += ab_explained(data)
    emit(L, a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
