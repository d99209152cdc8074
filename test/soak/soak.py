#!/usr/bin/env python3
"""Soak test of python-sandbox-mcp with faults.

Sends N mixed messages over several sessions at once, raw JSON-RPC over
stdio (test/soak/mcpproc.py): executions of varied code (results, prints,
exceptions, files, stderr, long and binary output, sleeps, numpy, syntax
errors, timeouts, the odd plot), list_artifacts, verify_outputs,
resources/list and resources/read, pings, malformed lines, and
notifications/cancelled for some running executions -- while a thread
SIGKILLs a session process (any process three levels or more below the
server: sessions and their checkpoints) every --kill-min..--kill-max s.

Checks:
  - every request answered exactly once; a cancelled one at most once;
    each malformed line gets exactly one error with id null;
  - every reply well-formed (mcpproc checks each line), and each
    execution's reply is its own: the code prints a token unique to the
    request, and an "ok" reply must show that token and no other;
  - deterministic requests give the right answer (results, verify_outputs
    of known files, resources/read of a known file);
  - the server's RSS at the end is at most --rss-limit-mb above that at
    the start (after warm-up), both printed;
  - once every request is answered, no process that the code started is
    left running (some cells fork a process that calls setsid to outlive
    its call, others attack the server from inside: forged results and
    checkpoints, descriptors used up, memory over the limit, bad frames);
  - after end of input: exit status 0 and no process of its tree left;
  - the workspace intact: the sentinel files unchanged, nothing created
    or changed outside the workspace, workspace/outputs still a directory.
Prints one line per failure (the first 40) and 'N passed, N failed'.
"""
import argparse
import hashlib
import json
import os
import random
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpproc  # noqa: E402

# Forks a process that leaves its session and orphans itself to outlive the
# call; the server must end it when the call ends.
ESCAPEE = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
           "        time.sleep(1000)\n    os._exit(0)")


def live_tree(pid):
    """{pid: comm} of the descendants of pid that are not zombies."""
    out = {}
    for p, (_, comm) in mcpproc.descendants(pid).items():
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                s = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if s[s.rfind(")") + 2:].split()[0] not in ("Z", "X"):
            out[p] = comm
    return out

# Cells that attack the server from inside the session, each with whether the
# call must fail. A forged reply or checkpoint, a memory bomb and a flood of
# bad frames must end as a failed call (never "ok" with a made-up answer).
# The escapee whose session then lowers its own descriptor limit is not an
# attack on the reply: the cell's code ends normally and "ok" is the truth;
# what must hold is that the escapee is ended anyway (checked after the last
# reply, when nothing the code started may be left).
FRAME = "import os, struct, json, socket, time\ndef frame(t, b): return struct.pack('<III', 0x50534d31, t, len(b)) + b\n"
HOSTILE = [
    # a made-up result, then it keeps running
    (FRAME + "os.write(3, frame(27, json.dumps({'status': 'ok', 'result': '1'}).encode()))\nwhile True: pass", True),
    # a child announced as the checkpoint, then the session kills itself
    # (its pidfd from clone(CLONE_PIDFD): the sandbox refuses pidfd_open)
    (FRAME + ("import signal, ctypes\nlibc = ctypes.CDLL(None)\nlibc.syscall.restype = ctypes.c_long\n"
             "fd = ctypes.c_int(-1)\nk = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(fd), 0, 0)\nif k == 0:\n"
             "    signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
             "    time.sleep(1000)\nsk = socket.socket(fileno=os.dup(3))\n"
             "sk.sendmsg([frame(30, b'{\"pid\": 1}')], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, "
             "struct.pack('i', fd.value))])\ntime.sleep(0.1)\nos.kill(os.getpid(), 9)"), True),
    # a setsid'd escapee, then its descriptors used up so it cannot clean up
    (ESCAPEE + "\nimport resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (4, 4))", False),
    # memory the per-process limit does not see: children of 500 MB each
    (("import os, time\nfor i in range(6):\n    if os.fork() == 0:\n        b = bytearray(500 << 20)\n"
     "        for o in range(0, len(b), 4096): b[o] = 1\n        time.sleep(100)\n"
     "        os._exit(0)\ntime.sleep(100)"), True),
    # an oversized frame, then random ones
    (FRAME + ("os.write(3, frame(27, b'[' * (20 << 20)))\nimport random\n"
             "for i in range(200):\n    os.write(3, frame(random.randrange(40), os.urandom(random.randrange(64))))"), True),
]

MALFORMED = [b"{", b"not json", b"[]", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","id":1,"method":"ping"} x',
             b'"just a string"', b"\xff\xfe", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
             b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', b"{" * 2000 + b"}" * 2000]
STATUSES = ("ok", "error", "timeout", "cancelled", "crashed", "memory")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tree_outside_workspace(root, ws):
    """{relpath: (size, mtime_ns)} of every file in root outside ws."""
    out = {}
    for d, dirs, files in os.walk(root):
        if os.path.realpath(d) == ws:
            dirs[:] = []
            continue
        dirs[:] = [x for x in dirs if os.path.realpath(os.path.join(d, x)) != ws]
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.failures = []
        self.passed = 0
        self.expect = {}     # id -> (kind, check, detail)
        self.cancelled = set()
        self.malformed = 0
        self.kills = 0
        self.kill_log = []
        self.stop = threading.Event()
        self.counts = {}

    def fail(self, msg):
        self.failures.append(msg)

    # ---- the requests ----------------------------------------------------

    def exec_request(self, rid, sess):
        tok = f"tok{rid}"
        r = self.rng.random()
        a, b = self.rng.randint(2, 999), self.rng.randint(2, 999)
        want_tok, want_result, timeout, must_fail = True, None, None, False
        if r < 0.22:
            code, want_result = f"print('{tok}')\n{a} * {b}", str(a * b)
        elif r < 0.32:
            code = f"print('{tok}')\nraise ValueError('{tok} failed')"
        elif r < 0.44:
            code = (f"p = 'workspace/outputs/{sess}-{rid}.txt'\nopen(p, 'w').write('{tok}')\n"
                    f"print('{tok}', open(p).read() == '{tok}')")
        elif r < 0.52:
            code = f"v_{sess} = globals().get('v_{sess}', 0) + 1\nprint('{tok}', v_{sess})"
        elif r < 0.58:
            code = f"import sys\nsys.stderr.write('{tok} on stderr\\n')\nprint('{tok}')"
        elif r < 0.63:
            code = f"print('{tok}')\nprint('y' * 30000)\nprint('tail')"
        elif r < 0.68:
            code = f"import os\nos.write(1, bytes(range(256)))\nos.write(2, b'\\xff\\x00')\nprint('\\n{tok}')"
        elif r < 0.83:
            code = f"import time\ntime.sleep({self.rng.uniform(0.05, 1.2):.2f})\nprint('{tok}')"
        elif r < 0.90:
            code, want_result = f"import numpy as np\nprint('{tok}')\nint(np.arange({a}).sum())", str(a * (a - 1) // 2)
        elif r < 0.95:
            code, want_tok = "def broken(:\n    pass", False
        elif r < 0.97:
            code, timeout = f"print('{tok}', flush=True)\nwhile True: pass", 0.5
        elif r < 0.985:
            code = (f"import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2)); plt.plot([1, {a}])\n"
                    f"plt.savefig('workspace/outputs/plot-{rid}.png'); plt.close('all'); print('{tok}')")
        elif r < 0.993:
            # A process that leaves its session (setsid, double fork) to
            # outlive the call: it must be ended when the call ends.
            code = ESCAPEE + f"\nprint('{tok}')"
        elif r < 0.996:
            code = f"print('{tok}'); 1 / 0"
        else:
            # An attack on the server from inside (see HOSTILE): it fails.
            attack, must_fail = self.rng.choice(HOSTILE)
            code, timeout = f"print('{tok}', flush=True)\n" + attack, 5
            self.counts["hostile"] = self.counts.get("hostile", 0) + 1
        args = {"code": code, "session": sess}
        if timeout:
            args["timeout_s"] = timeout
        if self.rng.random() < 0.02:
            args["reset"] = True

        def check(m):
            res = m.get("result")
            if not isinstance(res, dict) or not isinstance(res.get("content"), list) or not res["content"]:
                return f"execute_python without content: {str(m)[:200]}"
            text = res["content"][0].get("text", "")
            status = text.split(" ", 1)[0]
            if status not in STATUSES:
                return f"unknown status line: {text[:120]!r}"
            if res.get("isError") != (status != "ok"):
                return f"isError {res.get('isError')} with status {status}"
            self.counts["status:" + status] = self.counts.get("status:" + status, 0) + 1
            toks = set(re.findall(r"tok\d+", text))
            if toks - {tok}:
                return f"reply of {rid} shows another request's output: {sorted(toks - {tok})[:3]}"
            if must_fail and status == "ok":
                return f"an attack from inside the session ended ok: {text[:200]!r}"
            if status == "ok":
                if want_tok and tok not in text:
                    return f"ok reply of {rid} lacks its output {tok}: {text[:200]!r}"
                if want_result and f"result:\n{want_result}\n" not in text:
                    return f"ok reply of {rid} lacks result {want_result}: {text[:300]!r}"
            return None
        return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                "params": {"name": "execute_python", "arguments": args}}, check

    def next_request(self, rid):
        sess = self.rng.choice(self.sessions)
        r = self.rng.random()
        if r < 0.46:
            return ("exec",) + self.exec_request(rid, sess)
        if r < 0.56:
            def check(m):
                sc = (m.get("result") or {}).get("structuredContent")
                if not isinstance(sc, dict) or sc.get("count") != len(sc.get("artifacts", [None])):
                    return f"list_artifacts: {str(m)[:200]}"
                paths = [x.get("path") for x in sc["artifacts"]]
                if paths != sorted(paths):
                    return "list_artifacts not sorted by path"
                return None
            args = self.rng.choice([{}, {"path": "workspace/outputs"}, {"pattern": "*.csv"}, {"include_hidden": True}])
            return "list", {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                            "params": {"name": "list_artifacts", "arguments": args}}, check
        if r < 0.64:
            def check(m):
                sc = (m.get("result") or {}).get("structuredContent")
                if not isinstance(sc, dict) or sc.get("status") != "completed" or sc.get("failed") != 0:
                    return f"verify_outputs of the known files: {str(m)[:300]}"
                return None
            return "verify", {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
                "name": "verify_outputs", "arguments": {
                    "files": ["workspace/data.csv", {"path": "workspace/keep/sentinel.txt", "kind": "text"},
                              {"path": "workspace/keep/meta.json", "kind": "json", "required_keys": ["name"]}],
                    "session": sess, "require_success": False,
                    "write_summary": self.rng.random() < 0.3}}}, check
        if r < 0.71:
            def check(m):
                res = m.get("result")
                if not isinstance(res, dict) or not isinstance(res.get("resources"), list):
                    return f"resources/list: {str(m)[:200]}"
                return None
            return "res-list", {"jsonrpc": "2.0", "id": rid, "method": "resources/list", "params": {}}, check
        if r < 0.78:
            def check(m):
                cs = (m.get("result") or {}).get("contents")
                if not isinstance(cs, list) or not cs or cs[0].get("text") != self.data_csv:
                    return f"resources/read of data.csv: {str(m)[:200]}"
                return None
            return "res-read", {"jsonrpc": "2.0", "id": rid, "method": "resources/read",
                                "params": {"uri": self.data_uri}}, check
        if r < 0.88:
            def check(m):
                return None if m.get("result") == {} else f"ping: {str(m)[:200]}"
            return "ping", {"jsonrpc": "2.0", "id": rid, "method": "ping"}, check
        if r < 0.94:
            return "malformed", self.rng.choice(MALFORMED), None
        # A cancellation: a sleeping execution, cancelled a little later.
        code = f"import time\nprint('tok{rid}', flush=True)\ntime.sleep({self.rng.uniform(0.5, 3):.2f})"
        return "cancel", {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
            "name": "execute_python", "arguments": {"code": code, "session": sess}}}, None

    # ---- faults ----------------------------------------------------------

    def killer(self, srv):
        while not self.stop.wait(self.rng.uniform(self.a.kill_min, self.a.kill_max)):
            d = srv.snapshot_procs()
            depth = {}
            procs = {p: mcpproc.proc_stat(p) for p in d}

            def dep(p):
                if p == srv.p.pid:
                    return 0
                if p in depth:
                    return depth[p]
                st = procs.get(p)
                depth[p] = 99 if not st else 1 + dep(st[0]) if st[0] in procs or st[0] == srv.p.pid else 99
                return depth[p]
            victims = [p for p in d if 3 <= dep(p) < 99]
            if victims:
                v = self.rng.choice(victims)
                try:
                    os.kill(v, signal.SIGKILL)
                    self.kills += 1
                    self.kill_log.append((time.monotonic(), v))
                except OSError:
                    pass

    # ---- the run ---------------------------------------------------------

    def run(self):
        a = self.a
        root = mcpproc.make_root("psm-soak")
        ws = os.path.join(root, "workspace")
        os.makedirs(os.path.join(ws, "outputs"))
        os.makedirs(os.path.join(ws, "keep"))
        os.makedirs(os.path.join(root, "project"))
        self.data_csv = "x,y\n" + "".join(f"{i},{i * i}\n" for i in range(50))
        with open(os.path.join(ws, "data.csv"), "w") as f:
            f.write(self.data_csv)
        with open(os.path.join(ws, "keep", "sentinel.txt"), "w") as f:
            f.write("do not touch\n")
        with open(os.path.join(ws, "keep", "meta.json"), "w") as f:
            json.dump({"name": "soak"}, f)
        with open(os.path.join(root, "project", "readme.txt"), "w") as f:
            f.write("outside the workspace\n")
        sentinels = {p: sha(os.path.join(root, p)) for p in
                     ("workspace/data.csv", "workspace/keep/sentinel.txt", "workspace/keep/meta.json")}
        outside_before = tree_outside_workspace(root, os.path.realpath(ws))
        stderr_path = os.path.join(os.path.dirname(root), os.path.basename(root) + ".stderr")

        srv = mcpproc.Server(os.path.abspath(a.bin), root, ["--log-level", "warning"], stderr_path=stderr_path)
        t0 = time.monotonic()
        if not srv.initialize(60):
            print("soak: no reply to initialize; stderr:\n" + srv.stderr_tail())
            print("0 passed, 1 failed")
            return 1
        self.sessions = [f"s{i}" for i in range(a.sessions)]
        # Warm up: every session started, then the first RSS sample.
        for s in self.sessions:
            srv.call(f"warm-{s}", "execute_python", {"code": "import numpy, time; 1", "session": s}, 120)
        lst = srv.request("warm-rl", "resources/list", {}, 30) or {}
        self.data_uri = next((r["uri"] for r in (lst.get("result") or {}).get("resources", [])
                              if r.get("uri", "").endswith("/data.csv")), "file://" + os.path.join(ws, "data.csv"))
        rss_start = srv.rss_kb()
        rss_max = rss_start
        killer = threading.Thread(target=self.killer, args=(srv,), daemon=True)
        killer.start()

        outstanding = set()
        pending_cancels = []  # (time, rid)
        sent = 0
        last_rss = time.monotonic()
        while sent < a.requests and srv.alive():
            now = time.monotonic()
            while pending_cancels and pending_cancels[0][0] <= now:
                _, rid = pending_cancels.pop(0)
                srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": rid, "reason": "soak"}})
            if now - last_rss > 1.0:
                rss_max = max(rss_max, srv.rss_kb())
                last_rss = now
            outstanding = {r for r in outstanding if srv.count(r) == 0}
            if len(outstanding) >= a.concurrency:
                time.sleep(0.005)
                continue
            rid = sent + 1
            kind, msg, check = self.next_request(rid)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            sent += 1
            if kind == "malformed":
                self.malformed += 1
                srv.send_raw(msg + b"\n")
                continue
            srv.send(msg)
            if kind == "cancel":
                self.cancelled.add(rid)
                pending_cancels.append((now + self.rng.uniform(0.05, 0.6), rid))
                pending_cancels.sort()
            else:
                self.expect[rid] = (kind, check)
                outstanding.add(rid)
        for _, rid in pending_cancels:
            srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
        self.stop.set()
        killer.join()
        t_sent = time.monotonic()

        # Every request answered: executions last at most a few seconds,
        # sessions restart after kills.
        deadline = time.monotonic() + a.drain_timeout
        for rid in self.expect:
            srv.wait_reply(rid, max(0.05, deadline - time.monotonic()))
        time.sleep(2.0)  # late duplicates and cancelled replies
        for rid, (kind, check) in self.expect.items():
            with srv.lock:
                rs = list(srv.replies.get(srv.key(rid), []))
            if len(rs) != 1:
                self.fail(f"{kind} request {rid} answered {len(rs)} times")
                continue
            why = check(rs[0]) if check else None
            if why:
                self.fail(why)
            else:
                self.passed += 1
        n_cancel_replied = 0
        for rid in self.cancelled:
            n = srv.count(rid)
            n_cancel_replied += n
            if n <= 1:
                self.passed += 1
            else:
                self.fail(f"cancelled request {rid} answered {n} times")
        n_null = srv.count(None)
        if n_null == self.malformed:
            self.passed += self.malformed
        else:
            self.fail(f"{self.malformed} malformed lines, {n_null} replies with id null")
        for why, raw in srv.bad:
            self.fail(f"bad line from the server ({why}): {raw[:160]!r}")
        pong = srv.request("final-ping", "ping", timeout=30)
        if not (pong and pong.get("result") == {}):
            self.fail("no answer to ping at the end")
        # Nothing left running by the code: once every call is answered the
        # tree is the zygote, its pid 1 and at most a session and a
        # checkpoint per session name (zombies aside, reaped lazily).  One
        # more escapee per session first, now that nothing kills at random.
        for sess in self.sessions:
            r = srv.call(f"escape-{sess}", "execute_python", {"code": ESCAPEE + "\nprint('escaped')", "session": sess}, 60)
            if "escaped" not in json.dumps(r or {}):
                self.fail(f"the final escapee cell in session {sess}: {str(r)[:200]}")
        bound = 2 + 2 * len(self.sessions)
        deadline = time.monotonic() + 10
        while True:
            live = live_tree(srv.p.pid)
            if len(live) <= bound or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if len(live) > bound:
            self.fail(f"{len(live)} live processes in the server's tree after the last reply, "
                      f"at most {bound} expected: {sorted(live.items())[:8]}")
        else:
            self.passed += 1
        rss_end = srv.rss_kb()
        rss_max = max(rss_max, rss_end)
        grow_mb = (rss_end - rss_start) / 1024
        if grow_mb > a.rss_limit_mb:
            self.fail(f"RSS grew {grow_mb:.1f} MB (limit {a.rss_limit_mb})")
        else:
            self.passed += 1
        n_procs = len(srv.seen_procs)
        rc = srv.close(60)
        t_end = time.monotonic()
        if rc != 0:
            self.fail(f"exit status {rc} at end of input; stderr tail: {srv.stderr_tail(600)}")
        else:
            self.passed += 1
        left = srv.leftovers(10)
        if left:
            self.fail(f"{len(left)} processes left after exit: {dict(list(left.items())[:5])}")
            mcpproc.kill_tree_safely(left)
        else:
            self.passed += 1

        # The workspace intact.
        ok = True
        for p, h in sentinels.items():
            full = os.path.join(root, p)
            if not os.path.isfile(full) or sha(full) != h:
                self.fail(f"{p} changed or lost")
                ok = False
        if not os.path.isdir(os.path.join(ws, "outputs")) or os.path.islink(ws):
            self.fail("workspace/outputs is no longer a directory")
            ok = False
        outside_after = tree_outside_workspace(root, os.path.realpath(ws))
        if outside_after != outside_before:
            changed = set(outside_after.items()) ^ set(outside_before.items())
            self.fail(f"files outside the workspace changed: {sorted(changed)[:5]}")
            ok = False
        written = [x for x in os.listdir(os.path.join(ws, "outputs")) if x.endswith(".txt")]
        if ok:
            self.passed += 1

        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()) if not k.startswith("status:"))
        statuses = ", ".join(f"{k[7:]} {v}" for k, v in sorted(self.counts.items()) if k.startswith("status:"))
        print(f"soak: {sent} requests ({kinds}) over {len(self.sessions)} sessions, "
              f"{a.concurrency} in flight, seed {a.seed}")
        print(f"soak: execution statuses: {statuses}; cancelled requests answered: {n_cancel_replied} of "
              f"{len(self.cancelled)}")
        print(f"soak: {self.kills} session processes killed; {n_procs} processes seen in the server's tree; "
              f"{len(written)} files written to workspace/outputs")
        print(f"soak: server RSS {rss_start / 1024:.1f} MB at start, {rss_end / 1024:.1f} MB at end "
              f"(max {rss_max / 1024:.1f} MB); sending took {t_sent - t0:.1f} s, {t_end - t0:.1f} s in all; "
              f"exit status {rc}")
        for f in self.failures[:40]:
            print("FAIL: " + f)
        if len(self.failures) > 40:
            print(f"... and {len(self.failures) - 40} more")
        if a.keep or self.failures:
            print(f"soak: project kept at {root}, server stderr at {stderr_path}")
        else:
            mcpproc.rmtree(root)
            try:
                os.unlink(stderr_path)
            except OSError:
                pass
        print(f"{self.passed} passed, {len(self.failures)} failed")
        return 1 if self.failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--sessions", type=int, default=6, help="at most max_sessions (8)")
    ap.add_argument("--concurrency", type=int, default=24)
    ap.add_argument("--kill-min", type=float, default=0.3)
    ap.add_argument("--kill-max", type=float, default=1.5)
    ap.add_argument("--rss-limit-mb", type=float, default=50)
    ap.add_argument("--drain-timeout", type=float, default=600)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--keep", action="store_true")
    return Soak(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
