#!/usr/bin/env python3
"""Stress of the rollback promise with processes killed from outside.

Several sessions each hold a counter `n`; every call adds one to it (or,
for a fault, 1000 before it times out or crashes), so that each reply's
result says which state the call ran in.  Between the calls, at random:
the usual faults (a timeout, a crash by os._exit), an outside SIGKILL of a
session's process, of its checkpoint copy while it rests (followed at once
by a fault, which must still roll back), of its copy during a call (which
then ends well), of the copy during a call that then fails, and of the
zygote.  Every reply is checked against a model of what each session holds:
  - `kept`: the result is the model's value plus one, nothing else;
  - `rolled_back`: the next call finds the model's value (the state before
    the fault), not the fault's +1000 and not a fresh session;
  - `new` or `restored` (a state lost): only the first call of a session,
    or after a kill that may lose it (the zygote; a copy killed during a
    call that then fails), and always with a note that says why; a
    restored value must be one the session held;
  - the server never dies, every request is answered.
Jail modes: namespaces, and without them (build/helpers/dockerrun, the
rules of a container runtime) with --nsfree.  Prints what was lost and why,
and 'N passed, N failed'.  Usage:
  kill_state.py --bin build/python-sandbox-mcp [--ops 150] [--seed 1] [--nsfree]
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

INC = "try:\n    n\nexcept NameError:\n    n = 0\nn += 1\nn"
TIMEOUT = "try:\n    n\nexcept NameError:\n    n = 0\nn += 1000\nimport time\ntime.sleep(30)"
CRASH = "try:\n    n\nexcept NameError:\n    n = 0\nn += 1000\nimport os\nos._exit(3)"
SLOW = "try:\n    n\nexcept NameError:\n    n = 0\nimport time\ntime.sleep(0.6)\nn += 1\nn"
SLOW_TIMEOUT = "try:\n    n\nexcept NameError:\n    n = 0\nn += 1000\nimport time\ntime.sleep(30)"


def titled(pid, pattern):
    """The live descendants of pid whose title (cmdline) matches pattern."""
    out = []
    for p in mcpproc.descendants(pid):
        st = mcpproc.proc_stat(p)
        if not st:
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                s = f.read().decode("utf-8", "replace")
            if s[s.rfind(")") + 2:].split()[0] in ("Z", "X"):
                continue
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if re.search(pattern, cmd):
            out.append((p, st[0], cmd))
    return out


def gone(pid, ms=5000):
    """Waits until pid has exited (a zombie, or reaped)."""
    end = time.time() + ms / 1000
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                s = f.read().decode("utf-8", "replace")
            if s[s.rfind(")") + 2:].split()[0] in ("Z", "X"):
                return True
        except OSError:
            return True
        time.sleep(0.01)
    return False


class Stress:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.root = mcpproc.make_root("psm-killstate")
        binary = os.path.abspath(a.bin)
        if a.nsfree:
            # The server under a container runtime's default rules.
            wrap = os.path.join(os.path.dirname(self.root), f"psm-killstate-wrap-{os.getpid()}.sh")
            with open(wrap, "w") as f:
                f.write(f"#!/bin/sh\nexec {os.path.join(os.path.dirname(binary), 'helpers', 'dockerrun')} {binary} \"$@\"\n")
            os.chmod(wrap, 0o755)
            binary = wrap
            self.wrap = wrap
        # A key directory of its own for the saved sessions.
        self.xdg = mcpproc.make_root("psm-killstate-xdg")
        self.srv = mcpproc.Server(binary, self.root, ["--structured-content", "--log-level", "debug" if a.verbose or a.debug_log else "warning"],
                                  env={**os.environ, "XDG_STATE_HOME": self.xdg})
        self.srv.initialize()
        self.rid = 0
        self.sessions = ["a", "b", "c"]
        # What each session holds: its counter, None before its first call
        # or once its state may be lost; and every value it held.
        self.model = {s: None for s in self.sessions}
        self.history = {s: {0} for s in self.sessions}
        self.may_lose = {s: False for s in self.sessions}
        self.expect_new = {s: False for s in self.sessions}
        # The state is one it held, but which is not known (a rollback in
        # a process started after a loss).
        self.unsure = {s: False for s in self.sessions}
        self.failures = []
        self.trail = []
        self.zygote_killed = 0.0
        self.passed = 0
        self.lost = []
        self.counts = {}

    def fail(self, what):
        self.failures.append(what)
        if len(self.failures) == 1:
            print("the operations before the first failure:\n" + "\n".join(self.trail), flush=True)
        if len(self.failures) <= 40:
            print("FAIL:", what, flush=True)

    def say(self, line):
        self.trail = (self.trail + [line])[-12:]
        if self.a.verbose:
            print(line, flush=True)

    def call(self, sess, code, timeout_s=None, on_sent=None):
        self.rid += 1
        args = {"code": code, "session": sess}
        if timeout_s:
            args["timeout_s"] = timeout_s
        if on_sent:
            self.srv.send({"jsonrpc": "2.0", "id": self.rid, "method": "tools/call",
                           "params": {"name": "execute_python", "arguments": args}})
            on_sent()
            r = self.srv.wait_reply(self.rid, 120)
        else:
            r = self.srv.call(self.rid, "execute_python", args, 120)
        res = (r or {}).get("result") or {}
        sc = res.get("structuredContent") or {}
        text = (res.get("content") or [{}])[0].get("text", "")
        self.say(f"  {sess} #{self.rid}: {text.splitlines()[0] if text else '-'} -> {sc.get('result')} "
                 f"(held {self.model[sess]})")
        if not sc:
            self.fail(f"{sess}: no reply or no structured content for request {self.rid}: {str(r)[:300]}")
        return sc, text

    def check_inc(self, sess, sc, text, what):
        """A call that adds one and must end well."""
        st, state, result = sc.get("status"), sc.get("state"), sc.get("result")
        m, unsure = self.model[sess], self.unsure[sess]
        if st != "ok":
            self.fail(f"{sess} {what}: status {st}: {text[:300]!r}")
            return
        try:
            v = int(result)
        except (TypeError, ValueError):
            self.fail(f"{sess} {what}: result {result!r}")
            return
        if state == "kept":
            ok = (v - 1 in self.history[sess]) if unsure else (m is not None and v == m + 1)
            if not ok:
                self.fail(f"{sess} {what}: kept, result {v}, the session held {m}: {text[:300]!r}")
                return
        elif state in ("new", "restored"):
            # Expected: the first call of a session, or the call after a
            # reply that said the state was lost (expect_new); allowed, with
            # a note, after a kill that may lose it (may_lose).
            told = m is None or self.expect_new[sess]
            if not told and not self.may_lose[sess]:
                self.fail(f"{sess} {what}: state {state} where nothing could lose it (held {m}): {text[:400]!r}")
                return
            if not told and "note:" not in text:
                self.fail(f"{sess} {what}: state {state} without a note: {text[:300]!r}")
                return
            if (state == "new" and v != 1) or (state == "restored" and v - 1 not in self.history[sess]):
                self.fail(f"{sess} {what}: {state}, result {v}, never held: {text[:300]!r}")
                return
            if not told:
                self.lost.append((sess, what, state, m, v - 1))
        else:
            self.fail(f"{sess} {what}: state {state} for an ok call: {text[:300]!r}")
            return
        self.model[sess] = v
        self.history[sess].add(v)
        self.may_lose[sess] = self.expect_new[sess] = self.unsure[sess] = False
        self.passed += 1

    def check_fault(self, sess, sc, text, what, status, may_lose=False):
        """A call that failed: rolled back (the model holds), or, where the
        kill may lose the state, `new` with a note that says why."""
        st, state = sc.get("status"), sc.get("state")
        if st not in status:
            self.fail(f"{sess} {what}: status {st}, not {status}: {text[:300]!r}")
            return
        lose = may_lose or self.may_lose[sess]
        if state == "rolled_back":
            # After a kill that may have lost the state, the first call runs
            # in a new process (restored, or empty): rolled back to that.
            if self.model[sess] is None and not lose:
                self.fail(f"{sess} {what}: rolled back with nothing to roll back to")
                return
            self.unsure[sess] = self.unsure[sess] or lose
            self.passed += 1
            return
        if state == "new" and (lose or self.model[sess] is None or self.expect_new[sess]):
            if lose and not self.expect_new[sess] and self.model[sess] is not None:
                if "lost" not in text:
                    self.fail(f"{sess} {what}: state new without saying the state was lost: {text[:300]!r}")
                    return
                self.lost.append((sess, what, state, self.model[sess], None))
            self.model[sess] = None
            self.expect_new[sess] = True  # said: the next call starts new (or restored)
            self.may_lose[sess] = lose
            self.unsure[sess] = False
            self.passed += 1
            return
        self.fail(f"{sess} {what}: state {state} after {st} (held {self.model[sess]}): {text[:400]!r}")

    def copy_of(self, sess, ms=3000):
        """The session's one copy: titled so, and a child of the process
        titled as the session (the session carries the copy's title for the
        instant of its fork, so that the copy is born with it)."""
        end = time.time() + ms / 1000
        while time.time() < end:
            pid = self.srv.p.pid
            sessions = {p for p, _, _ in titled(pid, rf"^python-sandbox-mcp: session {sess}$")}
            c = [p for p, pp, _ in titled(pid, rf"^python-sandbox-mcp: checkpoint {sess} cell \d+$") if pp in sessions]
            if len(c) == 1:
                return c[0]
            time.sleep(0.02)
        return None

    def kill(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    def op(self, sess, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.say(f"{sess}: {kind}")
        if kind == "inc":
            sc, t = self.call(sess, INC)
            self.check_inc(sess, sc, t, "inc")
        elif kind == "timeout":
            sc, t = self.call(sess, TIMEOUT, timeout_s=1)
            self.check_fault(sess, sc, t, "timeout", ("timeout",))
        elif kind == "crash":
            sc, t = self.call(sess, CRASH)
            self.check_fault(sess, sc, t, "crash", ("crashed",))
        elif kind == "kill-session":
            # The session killed from outside while it rests: its copy
            # takes its place, the state is the same.
            s = titled(self.srv.p.pid, rf"^python-sandbox-mcp: session {sess}$")
            for p, _, _ in s:
                self.kill(p)
                gone(p)
        elif kind == "kill-copy-rest":
            # The copy killed while the session rests, then at once a fault
            # that needs a copy: rolled back all the same.
            c = self.copy_of(sess)
            if c:
                self.kill(c)
                gone(c)
            sc, t = self.call(sess, TIMEOUT, timeout_s=1)
            self.check_fault(sess, sc, t, "timeout after the copy was killed at rest", ("timeout",))
        elif kind == "kill-copy-call":
            # The copy killed during a call that ends well: kept, and a new
            # copy before the next call.
            def during():
                time.sleep(0.2)
                c = self.copy_of(sess, 300)
                if c:
                    self.kill(c)
            sc, t = self.call(sess, SLOW, on_sent=during)
            self.check_inc(sess, sc, t, "a call during which the copy was killed")
        elif kind == "kill-copy-fail":
            # The copy killed during a call that then fails: the state is
            # lost (or comes back from disk), and the reply says so.
            def during():
                time.sleep(0.3)
                c = self.copy_of(sess, 300)
                if c:
                    self.kill(c)
            had = self.copy_of(sess, 500) is not None
            sc, t = self.call(sess, SLOW_TIMEOUT, timeout_s=2, on_sent=during)
            self.check_fault(sess, sc, t, "timeout after the copy was killed during the call", ("timeout",), may_lose=had)
            if had and sc.get("state") == "new" and "killed" not in t:
                self.fail(f"{sess}: a lost state whose note does not name the kill: {t[:300]!r}")
        elif kind == "kill-zygote":
            # Not within 12 s of the last one: the server takes zygotes that
            # die within 10 s of their start for a crash loop, and stops
            # starting them after five.
            if time.time() - self.zygote_killed < 12:
                return self.op(sess, "inc")
            self.zygote_killed = time.time()
            zs = titled(self.srv.p.pid, r"^python-sandbox-mcp: zygote$")
            pids = {p for p, _, _ in zs}
            inner = [p for p, pp, _ in zs if pp in pids] or [p for p, _, _ in zs]
            for p in inner[:1]:
                self.kill(p)
                gone(p)
            for s in self.sessions:
                self.may_lose[s] = self.model[s] is not None or self.may_lose[s]

    def run(self):
        kinds = (["inc"] * 10 + ["timeout"] * 2 + ["crash"] * 2 + ["kill-session"] + ["kill-copy-rest"] * 2 +
                 ["kill-copy-call"] + ["kill-copy-fail"] + (["kill-zygote"] if self.a.zygote else []))
        for s in self.sessions:
            self.op(s, "inc")
        # Each kind once first, in a random order, then at random: a short
        # run (make test's) kills the zygote and each kind of copy too, where
        # chance alone left some out.
        first = list(dict.fromkeys(kinds))
        self.rng.shuffle(first)
        for i in range(self.a.ops):
            sess = self.rng.choice(self.sessions)
            kind = first[i] if i < len(first) else self.rng.choice(kinds)
            # A kill of a copy needs a state to have been copied.
            if kind.startswith("kill-copy") and self.model[sess] is None:
                kind = "inc"
            self.op(sess, kind)
            if not self.srv.alive():
                self.fail("the server died")
                break
        for s in self.sessions:
            if self.srv.alive():
                self.op(s, "inc")
        code = self.srv.close()
        if code != 0:
            self.fail(f"exit status {code} after end of input")
        print(f"ops: {self.counts}")
        print(f"states lost ({len(self.lost)}): " + "; ".join(f"{s} {w}: {st} (held {m}, now {v})" for s, w, st, m, v in self.lost))
        print(f"{self.passed} passed, {len(self.failures)} failed", flush=True)
        if not self.failures:
            mcpproc.rmtree(self.root)
            mcpproc.rmtree(self.xdg)
        if getattr(self, "wrap", None):
            os.unlink(self.wrap)
        return 1 if self.failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nsfree", action="store_true", help="run the server under build/helpers/dockerrun")
    ap.add_argument("--verbose", action="store_true", help="each operation and the head of its reply")
    ap.add_argument("--debug-log", action="store_true", help="the server's log at debug level (server.stderr in the project)")
    ap.add_argument("--no-zygote", dest="zygote", action="store_false", help="no kills of the zygote")
    sys.exit(Stress(ap.parse_args()).run())


if __name__ == "__main__":
    main()
