#!/usr/bin/env python3
"""Hostile inputs that look legitimate.

One server takes, in turn: a 100 MB JSON-RPC line, deeply nested JSON, a
10 MB and a 3 MB code argument, 10,000 sessions requested, a billion-row
print, binary output; after each, it must still answer ping and run code.
Then two SKILL.md files are given to --skill: one of 100 MB and an alias
bomb; each must make `--check` exit 1 with one line on stderr naming the
file, and a served server answer every call with that error, quickly.
Limits (docs/TOOLS.md and mcp/server.h): a line is at most 8 MiB (-32600,
with the request's id when it stands in the line's first 4 KiB, else id
null), code at most 2 MiB (an isError result), sessions
at most limits.max_sessions (8 by default; an isError result naming it).
Prints one line per case and 'N passed, N failed'.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpproc  # noqa: E402


class Hostile:
    def __init__(self, a):
        self.a = a
        self.passed = 0
        self.failed = 0
        self.rid = 0

    def result(self, name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def next_id(self, tag):
        self.rid += 1
        return f"{tag}-{self.rid}"

    def still_serving(self, srv, name):
        pong = srv.request(self.next_id("ping"), "ping", timeout=30)
        r = srv.call(self.next_id("after"), "execute_python", {"code": "6 * 7", "session": "default"}, 60)
        text = ((r or {}).get("result") or {}).get("content", [{}])[0].get("text", "")
        ok = pong is not None and pong.get("result") == {} and "result:\n42" in text
        self.result(f"{name}: still serving", ok, "ping and 6 * 7 answered" if ok else
                    f"ping {pong!r:.100}, exec {text[:200]!r}; stderr: {srv.stderr_tail(300)!r}")

    def null_errors(self, srv):
        with srv.lock:
            return list(srv.replies.get(srv.key(None), []))

    def wait_null(self, srv, n, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and len(self.null_errors(srv)) < n:
            time.sleep(0.05)
        return self.null_errors(srv)

    def hwm_kb(self, srv):
        return mcpproc.status_kb(srv.p.pid, "VmHWM")

    def text_of(self, r):
        return ((r or {}).get("result") or {}).get("content", [{}])[0].get("text", "")

    def run(self):
        a = self.a
        root = mcpproc.make_root("psm-hostile")
        os.makedirs(os.path.join(root, "workspace", "outputs"))
        srv = mcpproc.Server(os.path.abspath(a.bin), root, ["--log-level", "warning"],
                             stderr_path=root + ".stderr")
        if not srv.initialize(60):
            self.result("initialize", False, srv.stderr_tail())
            return self.finish(srv, root)
        srv.call("warm", "execute_python", {"code": "1"}, 60)
        rss0 = srv.rss_kb()

        # 1. A 100 MB line: refused once with -32600 and the request's own
        # id (it stands at the line's start), memory bounded while it
        # streams in; the same line with its id after the padding is
        # refused with id null.
        n0 = len(self.null_errors(srv))
        t = time.monotonic()
        head = b'{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":"'
        chunk = b"a" * (1 << 20)
        rss_peak = [0]
        stop = threading.Event()

        def sample():
            # The kernel's high-water mark, so a peak between samples counts.
            while True:
                rss_peak[0] = max(rss_peak[0], srv.rss_kb(), self.hwm_kb(srv))
                if stop.wait(0.05):
                    break
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        srv.send_raw(head)
        for _ in range(100):
            srv.send_raw(chunk)
        srv.send_raw(b'"}}\n')
        r = srv.wait_reply("huge", 60)
        stop.set()
        th.join()
        rss_peak[0] = max(rss_peak[0], self.hwm_kb(srv))
        e = (r or {}).get("error") or {}
        ok = (e.get("code") == -32600 and "8 MiB" in e.get("message", "") and srv.count("huge") == 1
              and len(self.null_errors(srv)) == n0 and rss_peak[0] - rss0 < 32 * 1024)
        self.result("100 MB JSON-RPC line", ok,
                    f"reply to its id {e.get('code')} {e.get('message', '')[:90]!r}, replies {srv.count('huge')}, "
                    f"id-null errors {len(self.null_errors(srv)) - n0}, RSS {rss0 // 1024} -> peak "
                    f"{rss_peak[0] // 1024} MB, {time.monotonic() - t:.1f} s")
        srv.send_raw(b'{"jsonrpc":"2.0","method":"ping","params":{"pad":"' + b"a" * (9 << 20) + b'"},"id":"late"}\n')
        errs = self.wait_null(srv, n0 + 1, 60)[n0:]
        ok = len(errs) == 1 and errs[0]["error"]["code"] == -32600 and srv.count("late") == 0
        self.result("9 MB line, id at its end", ok, f"{len(errs)} id-null error(s), replies to its id {srv.count('late')}")
        self.still_serving(srv, "100 MB line")

        # 2. Deep nesting: 100,000 brackets, as a whole message and inside
        # params; cJSON stops at 1000 levels.
        n0 = len(self.null_errors(srv))
        srv.send_raw(b"[" * 100000 + b"]" * 100000 + b"\n")
        deep = b'{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"x":' + b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"}}\n"
        srv.send_raw(deep)
        ok_deep = b'{"jsonrpc":"2.0","id":"deep-ok","method":"ping","params":{"x":' + b"[" * 900 + b"]" * 900 + b"}}\n"
        srv.send_raw(ok_deep)
        errs = self.wait_null(srv, n0 + 2, 30)[n0:]
        r_ok = srv.wait_reply("deep-ok", 30)
        codes = [x["error"]["code"] for x in errs]
        ok = codes == [-32700, -32700] and srv.count("deep") == 0 and r_ok is not None and "result" in r_ok
        self.result("deeply nested JSON", ok, f"100,000 levels -> errors {codes} (id null); 900 levels -> "
                    f"{'answered' if r_ok and 'result' in r_ok else r_ok!r:.80}")
        self.still_serving(srv, "deep JSON")

        # 3. Code arguments: 10 MB (over the 8 MiB line: refused with its
        # id) and 3 MB (over the 2 MiB code limit, inside a legal line).
        n0 = len(self.null_errors(srv))
        big = "x = 1\n" + "#" * (10 << 20)
        srv.send({"jsonrpc": "2.0", "id": "code10", "method": "tools/call",
                  "params": {"name": "execute_python", "arguments": {"code": big}}})
        r = srv.wait_reply("code10", 30)
        time.sleep(0.5)
        e = (r or {}).get("error") or {}
        ok = e.get("code") == -32600 and srv.count("code10") == 1 and len(self.null_errors(srv)) == n0
        self.result("10 MB code argument", ok, f"line refused: {e.get('message', '')[:80]!r}" if e else f"reply {r!r:.120}")
        r = srv.call("code3", "execute_python", {"code": "x = 1\n" + "#" * (3 << 20)}, 60)
        text = self.text_of(r)
        ok = r is not None and r["result"].get("isError") is True and ("2 MiB" in text or "2097152" in text)
        self.result("3 MB code argument", ok, f"isError {((r or {}).get('result') or {}).get('isError')}: {text[:140]!r}")
        self.still_serving(srv, "big code")

        # 4. 10,000 sessions requested: at most max_sessions start, the
        # rest are refused naming limits.max_sessions.
        t = time.monotonic()
        n = a.sessions
        for i in range(n):
            srv.send({"jsonrpc": "2.0", "id": f"sess-{i}", "method": "tools/call",
                      "params": {"name": "execute_python", "arguments": {"code": "1", "session": f"s{i}"}}})
        for i in range(n):
            srv.wait_reply(f"sess-{i}", 300)
        answered = sum(1 for i in range(n) if srv.count(f"sess-{i}") == 1)
        oks, named, other = 0, 0, []
        for i in range(n):
            with srv.lock:
                rs = srv.replies.get(srv.key(f"sess-{i}"), [])
            if not rs:
                continue
            res = rs[0].get("result") or {}
            txt = self.text_of(rs[0])
            if not res.get("isError"):
                oks += 1
            elif "max_sessions" in txt:
                named += 1
            else:
                other.append(txt[:120])
        procs = len(mcpproc.descendants(srv.p.pid))
        ok = answered == n and oks <= 8 and oks + named == n
        self.result(f"{n} sessions requested", ok,
                    f"{answered} answered, {oks} ran, {named} refused naming limits.max_sessions, "
                    f"{len(other)} other {other[:2]}; {procs} processes in the tree; "
                    f"{time.monotonic() - t:.1f} s")
        self.still_serving(srv, "many sessions")

        # 5. A billion-row print, bounded by the timeout.
        t = time.monotonic()
        r = srv.call("billion", "execute_python",
                     {"code": "for i in range(10**9):\n    print(i)", "timeout_s": 5}, 120)
        dt = time.monotonic() - t
        line_len = len(json.dumps(r)) if r else 0
        text = self.text_of(r)
        logs = os.path.join(root, "workspace", ".logs")
        log_mb = sum(os.path.getsize(os.path.join(logs, f)) for f in os.listdir(logs)) / 1e6 if os.path.isdir(logs) else 0
        ok = r is not None and text.startswith("timeout") and dt < 30 and line_len < 200_000
        self.result("billion-row print", ok, f"{text.split(chr(10))[0][:90]!r} after {dt:.1f} s, reply "
                    f"{line_len} bytes, workspace/.logs {log_mb:.1f} MB, RSS {srv.rss_kb() // 1024} MB")
        self.still_serving(srv, "billion rows")

        # 6. Binary output on both streams.
        code = ("import os, sys\nos.write(1, os.urandom(1 << 20))\nsys.stdout.buffer.write(bytes(range(256)) * 64)\n"
                "sys.stdout.flush()\nos.write(2, b'\\x00\\xff\\xfe\\x1b[31m' * 1000)\nb'\\x00\\x01'")
        r = srv.call("binary", "execute_python", {"code": code}, 60)
        text = self.text_of(r)
        ok = r is not None and text.startswith("ok") and not srv.bad and not srv.nonutf8
        self.result("binary output", ok, f"{text.split(chr(10))[0][:80]!r}, {len(text)} chars of text, "
                    f"reply lines all valid UTF-8 JSON: {not srv.bad and not srv.nonutf8}")
        self.still_serving(srv, "binary output")

        rss1 = srv.rss_kb()
        self.result("memory after all of it", rss1 - rss0 < 50 * 1024,
                    f"server RSS {rss0 / 1024:.1f} MB at start, {rss1 / 1024:.1f} MB at end")
        return self.finish(srv, root)

    def finish(self, srv, root):
        rc = srv.close(60)
        left = srv.leftovers(10)
        bad = srv.bad + [("not UTF-8", x) for x in srv.nonutf8]
        self.result("clean exit", rc == 0 and not left and not bad,
                    f"exit status {rc}, {len(left)} processes left, {len(bad)} bad reply lines {bad[:2]}")
        self.skills(root)
        mcpproc.rmtree(root)
        try:
            os.unlink(root + ".stderr")
        except OSError:
            pass
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0

    def skills(self, root):
        front = "---\nname: x\ndescription: y\npermissions:\n  fs_read: true\n---\n"
        big = os.path.join(root, "big-SKILL.md")
        with open(big, "w") as f:
            f.write(front)
            body = ("lorem ipsum " * 85 + "\n")
            for _ in range((100 << 20) // len(body) + 1):
                f.write(body)
        bomb = os.path.join(root, "bomb-SKILL.md")
        lines = ["---", "name: bomb", "description: billion laughs", "metadata:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        prev = "a"
        for c in "bcdefghi":
            lines.append(f"  {c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]")
            prev = c
        lines += ["permissions:", "  fs_read: true", "---", ""]
        with open(bomb, "w") as f:
            f.write("\n".join(lines))
        for name, path in (("100 MB SKILL.md", big), ("alias-bomb SKILL.md", bomb)):
            # --check: exit 1, the policy error once on stderr naming the file.
            t = time.monotonic()
            try:
                p = subprocess.run([os.path.abspath(self.a.bin), "--root", root, "--skill", path, "--check"],
                                   stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
                rc, err = p.returncode, p.stderr.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                rc, err = None, "(timed out)"
            dt = time.monotonic() - t
            lines_ = err.rstrip("\n").split("\n")
            ok = rc == 1 and len(lines_) == 1 and "policy error: " + path in err and dt < 10
            self.result(name + " --check", ok, f"exit {rc} in {dt:.2f} s, stderr: {err.strip()[:160]!r}")
            # Serving: it answers, and every call is refused with the error.
            t = time.monotonic()
            srv = mcpproc.Server(os.path.abspath(self.a.bin), root, ["--skill", path, "--log-level", "warning"],
                                 stderr_path=path + ".stderr")
            r = srv.initialize(30) and srv.call("x", "execute_python", {"code": "1"}, 30)
            text = self.text_of(r if isinstance(r, dict) else None)
            ok = (isinstance(r, dict) and r.get("result", {}).get("isError") is True and path in text
                  and time.monotonic() - t < 10)
            rc = srv.close(30)
            ok = ok and rc == 0 and not srv.bad
            self.result(name + " served", ok, f"exit {rc} in {time.monotonic() - t:.2f} s, reply {text[:160]!r}")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--sessions", type=int, default=10000)
    return Hostile(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
