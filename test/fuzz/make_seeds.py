#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets under fixtures/fuzz/.

Run from the repository root: python3 test/fuzz/make_seeds.py.  Seeds are
small, named for what they exercise, and regenerated identically; corpus
files that fuzz-merge added later (named by their SHA-1) are left alone.
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FX = os.path.join(ROOT, "fixtures")
OUT = os.path.join(FX, "fuzz")


def put(target, name, data):
    d = os.path.join(OUT, target, "corpus")
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- policy: every SKILL.md fixture and the project's own -----------------
for n in sorted(os.listdir(os.path.join(FX, "policy"))):
    with open(os.path.join(FX, "policy", n), "rb") as f:
        put("policy", n, f.read())
with open(os.path.join(ROOT, "SKILL.md"), "rb") as f:
    put("policy", "SKILL.md", f.read())

# ---- validate: byte 0 kind/options, byte 1 min_bytes, then the file -------
KIND = {"png": 1, "jpg": 2, "jpeg": 2, "svg": 3, "csv": 4, "json": 5, "txt": 6}
for n in sorted(os.listdir(os.path.join(FX, "files"))):
    ext = n.rsplit(".", 1)[-1]
    if ext not in KIND:
        continue
    with open(os.path.join(FX, "files", n), "rb") as f:
        body = f.read()
    k = KIND[ext]
    put("validate", n, bytes([k, 0]) + body)
    if ext == "json":
        put("validate", "keys-" + n, bytes([k | 8, 0]) + body)
    if ext == "csv":
        put("validate", "rows-" + n, bytes([k | 0x30, 0]) + body)
    put("validate", "min-" + n, bytes([k, 0x7F]) + body)

# ---- wire: mode, max_len exponent, chunk size, then the stream ------------
MAGIC = 0x50534D31


def msg(t, payload, magic=MAGIC, length=None):
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack("<III", magic, t, len(payload) if length is None else length) + payload


result = json.dumps({"status": "ok", "stdout": "2\n", "result": "2", "cell": 1})
stream = msg(8, result) + msg(11, '{"pid": 7}') + msg(10, '{"pid": 7, "resumed": true}') + msg(9, b"\x89PNG\r\n\x1a\n")
for mode, name in ((0, "sock"), (1, "pipe"), (2, "recv"), (4 | 32, "sock-fds"), (6 | 64, "recv-fds")):
    put("wire", name + "-stream", bytes([mode, 24, 0]) + stream)
    put("wire", name + "-chunk1", bytes([mode, 24, 1]) + stream)
    put("wire", name + "-chunk7", bytes([mode, 24, 7]) + stream)
    put("wire", name + "-badmagic", bytes([mode, 24, 0]) + msg(8, "{}", magic=0x31534D50))
    put("wire", name + "-toolong", bytes([mode, 4, 0]) + msg(8, "x" * 40))
    put("wire", name + "-huge", bytes([mode, 26, 0]) + msg(8, "", length=0xFFFFFFFF))
    put("wire", name + "-truncated", bytes([mode, 24, 3]) + msg(8, "abcdef", length=100))
    put("wire", name + "-empty", bytes([mode, 24, 0]) + msg(9, ""))
    put("wire", name + "-halfheader", bytes([mode, 24, 0]) + msg(8, "")[:7])
put("wire", "roundtrip", bytes([3 | (8 << 3), 24, 0]) + result.encode())
put("wire", "roundtrip-fds", bytes([3 | 4 | 96, 24, 0]) + b"payload")
put("wire", "roundtrip-over", bytes([3, 2, 0]) + b"more than four bytes")

# ---- jsonrpc: one line each -----------------------------------------------
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
          "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"}}
lines = {
    "initialize": {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "fuzz", "version": "1"}}},
    "initialized": {"jsonrpc": "2.0", "method": "notifications/initialized"},
    "ping": {"jsonrpc": "2.0", "id": "p-1", "method": "ping"},
    "tools-list": {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    "exec": {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "execute_python",
                        "arguments": {"code": "print('héllo')\n1/0", "session": "s-1", "timeout_s": 5,
                                      "reset": False}, "_meta": {"progressToken": 7}}},
    "list": {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
             "params": {"name": "list_artifacts", "arguments": {"path": "workspace", "pattern": "*.png",
                                                                "include_hidden": True}}},
    "verify": {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "verify_outputs",
                          "arguments": {"files": ["workspace/outputs/a.png",
                                                  {"path": "workspace/b.json", "kind": "json",
                                                   "required_keys": ["x"], "min_bytes": 2}],
                                        "require_success": False}}},
    "res-list": {"jsonrpc": "2.0", "id": 6, "method": "resources/list"},
    "res-read": {"jsonrpc": "2.0", "id": 7, "method": "resources/read",
                 "params": {"uri": "file:///tmp/x/workspace/a.txt"}},
    "cancel": {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "x"}},
    "setlevel": {"jsonrpc": "2.0", "id": 8, "method": "logging/setLevel", "params": {"level": "debug"}},
    "discover": {"jsonrpc": "2.0", "id": 9, "method": "server/discover"},
    "response": {"jsonrpc": "2.0", "id": 10, "result": {}},
    "float-id": {"jsonrpc": "2.0", "id": 1.5e300, "method": "ping"},
    "null-id": {"jsonrpc": "2.0", "id": None, "method": "ping"},
    # The 2026-07-28 era: the version and capabilities in each request's _meta.
    "modern-discover": {"jsonrpc": "2.0", "id": 11, "method": "server/discover",
                        "params": {"_meta": MODERN}},
    "modern-list": {"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {"_meta": MODERN}},
    "modern-exec": {"jsonrpc": "2.0", "id": 13, "method": "tools/call",
                    "params": {"name": "execute_python", "arguments": {"code": "1"},
                               "_meta": dict(MODERN, progressToken="t")}},
    "modern-read": {"jsonrpc": "2.0", "id": 14, "method": "resources/read",
                    "params": {"uri": "file:///etc/passwd", "_meta": MODERN}},
    "modern-badversion": {"jsonrpc": "2.0", "id": 15, "method": "tools/list",
                          "params": {"_meta": dict(MODERN, **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})}},
    "modern-nocaps": {"jsonrpc": "2.0", "id": 16, "method": "ping",
                      "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 2026}}},
}
for name, obj in lines.items():
    put("jsonrpc", name, json.dumps(obj, ensure_ascii=False))
put("jsonrpc", "batch", '[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
put("jsonrpc", "trailing", '{"jsonrpc":"2.0","id":1,"method":"ping"} {}')
put("jsonrpc", "escapes", '{"jsonrpc":"2.0","id":"\\u0000\\ud83d\\ude00\\n","method":"\\u00e9"}')
put("jsonrpc", "deep", "[" * 200 + "]" * 200)
put("jsonrpc", "numbers", '[0,-0,1e999,-1e-999,123456789012345678901234567890,0.1,1E+2]')
put("jsonrpc", "utf8-bad", b'{"jsonrpc":"2.0","id":"\xff\xfe","method":"\xc3"}')
put("jsonrpc", "crlf", '{"jsonrpc":"2.0","id":1,"method":"ping"}\r')
put("jsonrpc", "base64", "aGVsbG8gd29ybGQ=")
# ---- zygote: a script of ops (test/fuzz/fuzz_zygote.c: play) --------------
# op bytes: 0 jail(enf, nsfree, fd) 1 ready(ms, scratch, fd) 2 spawned(a, b, fd)
# 3 exited(pid, status, epoch, fd) 4 settled(sel, pid, fd) 5 warmed(str, sel,
# ok, tainted, fd) 6 fatal(str) 7 raw 8 read 9 sleep(n) 10 session(type, pid,
# fd) 11 fork a child 12 end; fd 1 canary, 2 itself, 3 the server, 4 its
# child, 5 a dead process, 6 a pipe, 7 /dev/null, 8 a directory.
JAIL = [0, 1, 0, 0]
READY = [1, 5, 0, 0]
WAIT = [9, 3, 9, 3, 9, 3, 8]
SPAWN_TRUE = [11, 2, 3, 0, 4]  # a child, then its pidfd for the id asked
SESSION = [10, 0, 2, 0, 10, 1, 2, 0, 10, 12, 2, 0]  # hello, started, an ok result
zygote = {
    "honest": JAIL + READY + WAIT + SPAWN_TRUE + SESSION + WAIT * 3,
    "silent": [9, 3],
    "not-enforceable": [0, 0, 1, 0] + WAIT,
    "fatal": [6, 5] + list(b"boom!"),
    "spawned-canary": JAIL + READY + WAIT + [2, 1, 0, 1] + WAIT,
    "spawned-unknown-canary": JAIL + READY + WAIT + [2, 0, 77, 1] + WAIT,
    "spawned-server": JAIL + READY + WAIT + [2, 1, 3, 3] + WAIT,
    "spawned-dead": JAIL + READY + WAIT + [2, 1, 5, 5] + WAIT,
    "spawned-pipe": JAIL + READY + WAIT + [11, 2, 3, 0, 6] + WAIT,
    "ready-climb": JAIL + READY + WAIT + [1, 0, 1, 0] + WAIT,
    "exited-child": JAIL + READY + WAIT + SPAWN_TRUE + [3, 2, 0, 1, 0] + WAIT,
    "settled-unasked": JAIL + READY + WAIT + [4, 0, 4, 0] + WAIT,
    "warmed-unasked": JAIL + READY + WAIT + [5, 4] + list(b"wave") + [0, 1, 0, 0] + WAIT,
    "checkpoint-canary": JAIL + READY + WAIT + SPAWN_TRUE + SESSION + WAIT + [10, 3, 0, 1] + WAIT,
    "checkpoint-server": JAIL + READY + WAIT + SPAWN_TRUE + SESSION + WAIT + [10, 3, 3, 3] + WAIT,
    "raw-oversized": JAIL + READY + [7, 1, 23, 1, 20, 4, 1, 2, 3, 4] + WAIT,
    "raw-bad-magic": [7, 0, 21, 0, 0, 0] + WAIT,
    "body-garbage": JAIL + READY + WAIT + [13, 3] + list(b"{{{") + [3, 0] + WAIT,
}
for name, ops in zygote.items():
    put("zygote", name, bytes(ops))
# ---- result: byte 0 even for W_RESULT, odd for the saver's summary --------
RESULTS = {
    "ok": {"status": "ok", "result": "2"},
    "error": {"status": "error", "error": {"type": "KeyError", "message": "'k'", "traceback": "Traceback...",
                                           "denied_by": "fs_write", "hint": "write in workspace/", "limit": None}},
    "memory": {"status": "memory", "error": {"type": "MemoryError"}},
    "imports": {"status": "ok", "imports": ["scipy.stats", "sklearn.linear_model"], "import_read": True},
    "restore": {"status": "ok", "restore": {"verified": True, "restored": ["df", "x"],
                                            "failed": [["f", "a lambda"]], "unsaved": [["g", "a generator"]],
                                            "restored_more": 3}},
    "forged-type": {"status": "ok", "error": {"type": 5}},
    "forged-status": {"status": "fine"},
}
for name, body in RESULTS.items():
    put("result", name, b"\0" + json.dumps(body).encode())
put("result", "summary", b"\1" + json.dumps({"unsaved": [["gen", "cannot pickle 'generator' object"]],
                                              "unsaved_more": 40}).encode())
put("result", "summary-bad", b"\1" + json.dumps({"unsaved": "all"}).encode())
# ---- save: the saver's stream, against a base save of 4 pieces of 64 KiB
# (labels 1 to 4; fuzz_save.c) ---------------------------------------------
KMIN = 64 << 10


def piece(kind, n, label, data=b""):
    return kind + struct.pack("<I", n) + bytes([label]) + bytes(15) + data


summary = json.dumps({"unsaved": [], "unsaved_more": 0}).encode()
head = struct.pack("<Q", len(summary)) + summary + struct.pack("<Q", 2) + b"{}"
put("save", "whole", b"PSMSAVE1" + struct.pack("<Q", len(head) + 5) + head + b"state")
put("save", "pieces-new", b"PSMSAVE2" + struct.pack("<Q", len(head) + 5) + piece(b"N", len(head) + 5, 0, head + b"state"))
named = piece(b"N", len(head), 0, head) + piece(b"S", KMIN, 2) + piece(b"S", KMIN, 4)
put("save", "pieces-named", b"PSMSAVE2" + struct.pack("<Q", len(head) + 2 * KMIN) + named)
put("save", "pieces-unheld", b"PSMSAVE2" + struct.pack("<Q", len(head) + KMIN) + piece(b"N", len(head), 0, head)
    + piece(b"S", KMIN, 9))
put("save", "pieces-short", b"PSMSAVE2" + struct.pack("<Q", 100) + piece(b"N", 60, 0, bytes(60)))
put("save", "pieces-many", b"PSMSAVE2" + struct.pack("<Q", 10) + b"".join(piece(b"N", 1, 0, b"x") for _ in range(10)))
put("save", "pieces-long", b"PSMSAVE2" + struct.pack("<Q", 10) + piece(b"N", 11, 0, bytes(11)))
put("save", "pieces-kind", b"PSMSAVE2" + struct.pack("<Q", 10) + piece(b"Q", 10, 0, bytes(10)))
print("seeds written under", OUT)
