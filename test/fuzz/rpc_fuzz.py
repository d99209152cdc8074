#!/usr/bin/env python3
"""Process-level fuzz of the JSON-RPC dispatcher (mcp/server.c).

handle_line() and dispatch() are static and drive the whole supervisor, so
they cannot be a libFuzzer target; test/fuzz/fuzz_jsonrpc.c covers in
process what they are made of (the parse of a line, the reply envelope,
the text helpers).  This script covers the rest from outside: it starts
the real binary, sends mutated JSON-RPC lines (seeds: fixtures/fuzz/rpc/
seeds.jsonl; structured mutations of the message tree and byte-level
mutations of the line), and checks

  - every line the server writes is valid UTF-8 JSON, one JSON-RPC 2.0
    response (id and exactly one of result/error) or notification;
  - each tracked request (its id is a fresh string "t<N>", so no other
    line can name it) gets exactly one reply, and a line that is a
    response (result or error, no method) gets none;
  - replies with id null (parse errors, invalid requests) are no more than
    the untracked lines sent;
  - the server still answers ping at the end, exits 0 at end of input,
    and leaves no process of its tree behind.

Lines in fixtures/fuzz/rpc/regressions/*.jsonl are replayed first (each
line as is; one whose id is a string "r-..." is a tracked request).  Usage: rpc_fuzz.py --bin build/python-sandbox-mcp
[--lines N] [--seed S] [--corpus DIR].  Prints 'N passed, N failed'.
"""
import argparse
import copy
import glob
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "soak"))
import mcpproc  # noqa: E402

WEIRD = [None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, -2 ** 64, 1e308, -0.0, 0.5, "", "x", "x" * 3000,
         "é" * 150, "\u0000", "😀", "../../etc/passwd", "/etc/shadow", "file:///etc/passwd",
         "workspace/../..", "*", "[", "\\", "\n", [], {}, [1, [2, [3]]], {"a": {"b": {}}},
         "workspace", "workspace/outputs", "default", "s" * 64, "s" * 65, "bad name!",
         {"path": "workspace/x.png", "kind": "png"}, ["workspace/a.csv"], -1e308, 1e-308]
METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
           "resources/templates/list", "logging/setLevel", "notifications/initialized",
           "notifications/cancelled", "server/discover", "", "x" * 199 + "é", "é" * 150, "\u0000",
           "prompts/list", "completion/complete"]
TOOLS = ["execute_python", "list_artifacts", "verify_outputs", "nope", ""]
KEYS = ["id", "method", "params", "jsonrpc", "result", "error", "name", "arguments", "code", "session",
        "timeout_s", "reset", "path", "pattern", "include_hidden", "files", "kind", "min_bytes",
        "required_keys", "min_rows", "require_success", "write_summary", "uri", "level", "requestId",
        "_meta", "progressToken", "cursor", "protocolVersion"]


def deep(n):
    v = []
    for _ in range(n):
        v = [v]
    return v


def leaves(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (i,))


def get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def setp(obj, path, val):
    if not path:
        return val
    get(obj, path[:-1])[path[-1]] = val
    return obj


def mutate_obj(rng, obj):
    obj = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        paths = list(leaves(obj))
        path = rng.choice(paths)
        r = rng.random()
        if r < 0.45:
            v = rng.choice(WEIRD + [deep(rng.randint(1, 120))])
            obj = setp(obj, path, copy.deepcopy(v))
        elif r < 0.6 and path:
            parent = get(obj, path[:-1])
            if isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, list):
                parent.pop(path[-1])
        elif r < 0.75:
            target = get(obj, path)
            if isinstance(target, dict):
                target[rng.choice(KEYS)] = copy.deepcopy(rng.choice(WEIRD))
            elif isinstance(target, list):
                target.append(copy.deepcopy(rng.choice(WEIRD)))
        elif r < 0.87 and isinstance(obj, dict):
            obj["method"] = rng.choice(METHODS)
        elif isinstance(obj, dict) and isinstance(obj.get("params"), dict):
            obj["params"]["name"] = rng.choice(TOOLS)
    return obj


def mutate_bytes(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        pos = rng.randrange(len(b) + 1)
        if r < 0.25 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif r < 0.45:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif r < 0.6 and b:
            del b[pos:pos + rng.randint(1, 16)]
        elif r < 0.7:
            del b[pos:]
        elif r < 0.8 and b:
            seg = b[pos:pos + rng.randint(1, 32)]
            b[pos:pos] = seg * rng.randint(1, 4)
        else:
            b[pos:pos] = rng.choice([b"{", b"}", b"[", b"]", b'"', b"\\", b"\\u", b",", b":", b"\r",
                                     b"\xc3", b"\xff", b"\x00", b"\t", b"1e999", b"null"])
    # One line stays one line.
    return bytes(b).replace(b"\n", b" ")


def load_seeds(corpus):
    seeds = []
    for path in sorted(glob.glob(os.path.join(corpus, "*.jsonl"))):
        with open(path, "rb") as f:
            for line in f:
                line = line.rstrip(b"\n")
                if line:
                    seeds.append(line)
    return seeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--corpus", default="fixtures/fuzz/rpc")
    ap.add_argument("--keep", action="store_true", help="keep the project directory")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    seeds = load_seeds(a.corpus)
    regress = load_seeds(os.path.join(a.corpus, "regressions"))
    seed_objs = []
    for s in seeds:
        try:
            seed_objs.append(json.loads(s))
        except ValueError:
            pass
    root = mcpproc.make_root("psm-rpcfuzz")
    os.makedirs(os.path.join(root, "workspace", "outputs"), exist_ok=True)
    with open(os.path.join(root, "workspace", "data.csv"), "w") as f:
        f.write("a,b\n1,2\n")
    srv = mcpproc.Server(os.path.abspath(a.bin), root, ["--timeout", "5", "--log-level", "error"])
    t0 = time.monotonic()
    failures = []
    passed = 0
    if not srv.initialize():
        print("rpc_fuzz: no reply to initialize; stderr:\n" + srv.stderr_tail(), file=sys.stderr)
        print("0 passed, 1 failed")
        return 1

    expect_one, expect_none = {}, set()  # tracked id -> the line sent
    untracked = 0
    sent = 0
    n_tracked = 0

    def send_line(raw, tracked_id=None, answered=True):
        nonlocal sent, untracked
        srv.send_raw(raw + b"\n")
        sent += 1
        if tracked_id is None:
            untracked += 1
        elif answered:
            expect_one[tracked_id] = raw
        else:
            expect_none.add(tracked_id)

    # A regression line whose id is a string "r-..." must be answered
    # exactly once; the others only must not break the server.
    for raw in regress:
        try:
            rid = json.loads(raw).get("id")
        except (ValueError, AttributeError):
            rid = None
        if isinstance(rid, str) and rid.startswith("r-"):
            send_line(raw, rid)
        else:
            send_line(raw)
    for i in range(a.lines):
        # Keep the queue of executions short: a few sessions run at once.
        while sum(1 for k in expect_one if srv.count(k) == 0) > 40 and srv.alive():
            time.sleep(0.05)
        if not srv.alive():
            break
        r = rng.random()
        if r < 0.65 and seed_objs:
            obj = mutate_obj(rng, rng.choice(seed_objs))
            if isinstance(obj, dict) and rng.random() < 0.85 and "id" in obj or (isinstance(obj, dict) and rng.random() < 0.3):
                n_tracked += 1
                tid = f"t{n_tracked}"
                obj["id"] = tid
                is_response = "method" not in obj and ("result" in obj or "error" in obj)
                send_line(json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass"),
                          tid, answered=not is_response)
            else:
                send_line(json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        elif r < 0.95 and seeds:
            send_line(mutate_bytes(rng, rng.choice(seeds)))
        else:
            send_line(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))).replace(b"\n", b" "))

    # Every tracked request answered (executions are capped at 5 s each).
    deadline = time.monotonic() + 300
    for tid in expect_one:
        srv.wait_reply(tid, max(0.1, deadline - time.monotonic()))
    time.sleep(1.0)
    for tid, raw in expect_one.items():
        n = srv.count(tid)
        if n == 1:
            passed += 1
        else:
            failures.append(f"request {tid} answered {n} times: {raw[:200]!r}")
    for tid in expect_none:
        n = srv.count(tid)
        if n == 0:
            passed += 1
        else:
            failures.append(f"a response line ({tid}) got {n} replies")
    with srv.lock:
        n_null = len(srv.replies.get(srv.key(None), []))
        known = set(map(srv.key, expect_one)) | set(map(srv.key, expect_none)) | {srv.key(None), srv.key("init")}
        strays = [k for k in srv.replies if k not in known]
    # Untracked lines may carry any id (mutated seeds): only count them.
    if n_null <= untracked + len(regress):
        passed += 1
    else:
        failures.append(f"{n_null} replies with id null for {untracked} untracked lines")
    for why, raw in srv.bad:
        failures.append(f"bad reply line ({why}): {raw[:200]!r}")
    if not srv.bad:
        passed += 1
    # A reply that is not UTF-8 is a failure when the request was UTF-8.
    for raw in srv.nonutf8:
        try:
            m = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            m = {}
        rid = m.get("id") if isinstance(m, dict) else None
        req = expect_one.get(rid) if isinstance(rid, str) else None
        if req is not None:
            try:
                req.decode("utf-8")
                failures.append(f"reply to valid UTF-8 request {rid} is not valid UTF-8: "
                                f"{raw[:60]!r}...{raw[-60:]!r}; request {req[:60]!r}...{req[-40:]!r}")
            except UnicodeDecodeError:
                pass
    pong = srv.request("final-ping", "ping", timeout=30)
    if pong is not None and "result" in pong:
        passed += 1
    else:
        failures.append("the server did not answer ping at the end")
    rss = srv.rss_kb()
    rc = srv.close()
    if rc == 0:
        passed += 1
    else:
        failures.append(f"exit status {rc} at end of input; stderr: {srv.stderr_tail(800)}")
    left = srv.leftovers()
    if not left:
        passed += 1
    else:
        failures.append(f"processes left after exit: {left}")
    dt = time.monotonic() - t0
    print(f"rpc_fuzz: seed {a.seed}, {sent} lines ({len(expect_one)} tracked requests, {len(expect_none)} "
          f"responses, {untracked} untracked), {srv.lines} reply lines, {len(strays)} other ids echoed, "
          f"{len(srv.nonutf8)} non-UTF-8 reply lines, {len(srv.seen_procs)} processes seen, "
          f"RSS at end {rss} KiB, {dt:.1f} s")
    for f in failures[:30]:
        print("FAIL: " + f)
    if len(failures) > 30:
        print(f"... and {len(failures) - 30} more")
    if not a.keep:
        mcpproc.rmtree(root)
    else:
        print("project kept at " + root)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
