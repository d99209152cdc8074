#!/usr/bin/env python3
"""Regression test: a session killed right around the end of its cells
must not shift later replies by one cell.

Found by the soak (test/soak/soak.py, 'reply of N shows another request's
output'): after a SIGKILL that lands just as a session finishes queued
cells, every later reply of that session carries the previous cell's
stdout and result, in ~0 ms.  Each round queues three quick cells in one
session, kills the session process after 0-20 ms, waits for the three
replies, then runs one check cell that must show its own token only.
Usage: kill_race.py --bin build/python-sandbox-mcp [--rounds 200].
Prints 'N passed, N failed'.
"""
import argparse
import os
import random
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpproc  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    root = mcpproc.make_root("psm-killrace")
    srv = mcpproc.Server(os.path.abspath(a.bin), root, ["--log-level", "warning"])
    srv.initialize()
    rng = random.Random(a.seed)

    def text(r):
        return ((r or {}).get("result") or {}).get("content", [{}])[0].get("text", "")

    def sessions():
        d = mcpproc.descendants(srv.p.pid)
        procs = {}
        for p in d:
            st = mcpproc.proc_stat(p)  # None when it ended meanwhile
            if st:
                procs[p] = st

        def depth(p):
            n = 0
            while p != srv.p.pid and p in procs:
                p, n = procs[p][0], n + 1
            return n if p == srv.p.pid else -1
        return [p for p in procs if depth(p) == 3]  # server > zygote > pid 1 > session

    n, passed, failed = 0, 0, 0
    for it in range(a.rounds):
        ids = []
        for _ in range(3):
            n += 1
            ids.append(n)
            srv.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": "execute_python", "arguments": {"code": f"print('tok{n}')", "session": "a"}}})
        time.sleep(rng.uniform(0, 0.02))
        for p in sessions():
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for i in ids:
            srv.wait_reply(i, 30)
        n += 1
        r = srv.call(n, "execute_python", {"code": f"print('tok{n}')\n{n}", "session": "a"}, 30)
        toks = re.findall(r"tok\d+", text(r))
        if toks == [f"tok{n}"] and f"result:\n{n}\n" in text(r):
            passed += 1
            continue
        failed += 1
        print(f"FAIL: round {it}: check cell {n} shows {toks}: {text(r)[:160]!r}")
        for k in range(3):
            n += 1
            r = srv.call(n, "execute_python", {"code": f"print('tok{n}')\n{n}", "session": "a"}, 30)
            print(f"  then cell {n}: {text(r)[:120]!r}")
        break
    rc = srv.close()
    mcpproc.rmtree(root)
    print(f"{passed} passed, {failed} failed (exit status {rc})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
