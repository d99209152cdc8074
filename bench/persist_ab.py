#!/usr/bin/python3
"""Two (or more) server builds' restores of the same saved state, interleaved.

bench/persist.py measures one build; on a shared machine the disk's speed
and the load move from one minute to the next, so two of its runs a few
minutes apart do not compare.  This saves one state with the first build,
then in each round restores it with every build in turn (the order flips
each round): cold, right after `cat` read the file just dropped from the
page cache, then warm.  It prints each build's median cold and warm
restore and the median of its cold restore / cold read pairs.

    bench/persist_ab.py "numpy array, 1 GiB" 5 build/python-sandbox-mcp /tmp/old-build

The state is one of bench/persist.py's (by its full name).  Not part of
`make test`.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import persist as P  # noqa: E402
from run import Server  # noqa: E402


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in P.STATES:
        sys.exit("usage: persist_ab.py STATE ROUNDS SERVER [SERVER...]; STATE one of: %s" % ", ".join(P.STATES))
    which, rounds, bins = sys.argv[1], int(sys.argv[2]), [os.path.abspath(b) for b in sys.argv[3:]]
    root = tempfile.mkdtemp(prefix="psm-bench-ab-")
    xdg = tempfile.mkdtemp(prefix="psm-bench-ab-state-")
    os.environ["XDG_STATE_HOME"] = os.environ["XDG_CONFIG_HOME"] = xdg  # one key for every build
    try:
        skill = os.path.join(root, ".agents/skills/code-interpreter-sandbox-executor/SKILL.md")
        os.makedirs(os.path.dirname(skill))
        with open(skill, "w") as f:
            f.write(P.SKILL)
        snap = os.path.join(root, "workspace/.sessions/default/state.snap")
        log = os.path.join(root, "server.log")
        subprocess.run([bins[0], "--trust", "--root", root, "--yes"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s = Server(bins[0], root, extra=["--log-level", "info"], stderr_path=log)
        s.initialize(timeout=120)
        s.execute("1", session="warm", timeout=300)
        P.timed(s, P.STATES[which])
        P.logged(log, r"state saved")
        s.close()
        cold, warm, ratio = ({b: [] for b in bins} for _ in range(3))
        for i in range(rounds):
            for b in bins if i % 2 == 0 else bins[::-1]:
                P.drop(snap)
                read = P.cat_s(snap)
                cold[b].append(P.restore_closed(b, root, log, snap, True))
                warm[b].append(P.restore_closed(b, root, log, snap, False))
                ratio[b].append(cold[b][-1] / read if read else 0.0)
        for b in bins:
            print("%s  %s: cold %.3f s, warm %.3f s, cold restore / cold read %.2f  [%s]" % (
                b, which, statistics.median(cold[b]), statistics.median(warm[b]), statistics.median(ratio[b]),
                " ".join("%.2f" % x for x in ratio[b])), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(xdg, ignore_errors=True)


if __name__ == "__main__":
    main()
