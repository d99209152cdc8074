#!/usr/bin/python3
"""make bench-history: what the server's history of a session costs.

One session of N calls (default 10,000) through the real server, each a
small cell that prints a line and returns a value (every tenth one writes a
file under workspace/outputs/, so its SHA-256 is recorded too), then:
  - the server's resident memory (VmRSS) after the first 100 calls and at
    the end, and its peak (VmHWM): the history must not make it grow;
  - the median call before and after, and the call latency per thousand;
  - the history file's size, bytes per call;
  - `python-sandbox-mcp export` of the whole session: its time, as a
    notebook and as a script, and the notebook's size;
  - verify_outputs' provenance of one file over the whole history.
Nothing here asserts a time or a size: it prints what it measured.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the bench's MCP client)


def history_file(root, state):
    ws = os.path.join(root, "workspace")
    h = hashlib.sha256(ws.encode()).hexdigest()[:32]
    return os.path.join(state, "python-sandbox-mcp", "history", h, "default.jsonl")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--calls", type=int, default=10000)
    a = ap.parse_args()
    a.server = os.path.abspath(a.server)
    tmp = tempfile.mkdtemp(prefix="psm-bench-history-")
    root = os.path.realpath(os.path.join(tmp, "project"))
    state = os.path.join(tmp, "state")
    os.makedirs(os.path.join(root, "workspace", "outputs"))
    env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=os.path.join(tmp, "config"))
    srv = run.Server(a.server, root, env=env, stderr_path=os.path.join(tmp, "stderr.log"))
    try:
        srv.initialize()
        lat = []
        rss_100 = 0
        for i in range(a.calls):
            code = "x = %d\nprint('call', x)\n" % i
            if i % 10 == 0:
                code += "open('workspace/outputs/f%d.txt', 'w').write('v%%d' %% x)\n" % (i % 50)
            code += "x * 2"
            t = time.monotonic()
            srv.execute(code)
            lat.append(time.monotonic() - t)
            if i == 99:
                rss_100 = run.status_kb(srv.pid, "VmRSS")
            if (i + 1) % 1000 == 0:
                print("%6d calls, median of the last 1000: %.2f ms, server VmRSS %d kB" % (
                    i + 1, statistics.median(lat[-1000:]) * 1000, run.status_kb(srv.pid, "VmRSS")), flush=True)
        rss_end = run.status_kb(srv.pid, "VmRSS")
        hwm = run.status_kb(srv.pid, "VmHWM")
        t = time.monotonic()
        r = srv.request("tools/call", {"name": "verify_outputs", "arguments": {
            "files": ["workspace/outputs/f0.txt"], "require_success": False}}, timeout=600)
        prov_ms = (time.monotonic() - t) * 1000
        prov = r.get("structuredContent", json.loads(r["content"][0]["text"]))["checks"][0]["provenance"]
    finally:
        srv.close()
    size = os.path.getsize(history_file(root, state))
    out = {}
    for fmt in ("ipynb", "py"):
        dest = os.path.join(tmp, "session." + fmt)
        t = time.monotonic()
        subprocess.run([a.server, "export", "--root", root, "--format", fmt, "-o", dest], check=True, env=env)
        out[fmt] = ((time.monotonic() - t) * 1000, os.path.getsize(dest))
    print()
    print("calls: %d" % a.calls)
    print("median call: first 1000 %.2f ms, last 1000 %.2f ms" % (
        statistics.median(lat[:1000]) * 1000, statistics.median(lat[-1000:]) * 1000))
    print("server VmRSS: after 100 calls %d kB, after %d %d kB; peak %d kB" % (rss_100, a.calls, rss_end, hwm))
    print("history file: %d bytes, %.0f bytes per call" % (size, size / a.calls))
    print("provenance over the whole history (verify_outputs, one file): %.0f ms -> %s" % (prov_ms, prov))
    for fmt, (ms, b) in out.items():
        print("export --format %s: %.0f ms, %d bytes" % (fmt, ms, b))
    shutil.rmtree(tmp, ignore_errors=True)


main()
