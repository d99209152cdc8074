#!/usr/bin/env python3
"""What checkpoints and saved sessions cost on agent work.

Runs the agent-workload tasks (bench/agent_tasks.py) in one session, twice
over, through four servers that differ only in their policy: the built-in
one, `persist: false`, `checkpoint: false`, and both off.  Each of these only
tightens the built-in policy, so no approval is needed.  Prints the median
task and the total for each, and the ratio against both off.

usage: bench/agent_policies.py --server build/python-sandbox-mcp [--rounds N]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the bench's MCP client)
from agent_tasks import TASKS, make_data  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = [
    ("built-in policy", []),
    ("persist: false", [("persist: true", "persist: false")]),
    ("checkpoint: false", [("checkpoint: true", "checkpoint: false")]),
    ("both off", [("persist: true", "persist: false"), ("checkpoint: true", "checkpoint: false")]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    skill = open(os.path.join(REPO, "SKILL.md"), encoding="utf-8").read()
    work = tempfile.mkdtemp(prefix="psm-bench-policies-")
    os.chmod(work, 0o755)  # reachable by the namespace-free jail's uid
    # What the servers learn or save stays here, never in the user's state.
    os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "config")
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    rows = []
    try:
        for i, (name, repl) in enumerate(VARIANTS):
            root = os.path.join(work, "p%d" % i)
            os.makedirs(root)
            make_data(root)
            text = skill
            for old, new in repl:
                if old not in text:
                    sys.exit("SKILL.md has no %r" % old)
                text = text.replace(old, new)
            path = os.path.join(root, "SKILL.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            s = run.Server(os.path.abspath(a.server), root, path)
            try:
                s.initialize()
                s.execute("import pandas")
                xs = []
                for _ in range(a.rounds):
                    for _, code in TASKS:
                        t0 = run.now()
                        s.execute(code, timeout=300)
                        xs.append(run.now() - t0)
            finally:
                s.close()
            rows.append((name, statistics.median(xs) * 1000, sum(xs)))
            print("bench: %s done" % name, file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = rows[-1][2]
    print("| policy | median task | whole run | against both off |")
    print("|---|---:|---:|---:|")
    for name, med, total in rows:
        print("| %s | %.0f ms | %.1f s | %.2f× |" % (name, med, total, total / base))


if __name__ == "__main__":
    main()
