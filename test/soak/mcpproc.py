"""A raw JSON-RPC client of python-sandbox-mcp for the soak, hostile-input
and process-level fuzz tests (stdlib only: runs on Debian's python3).

It speaks the wire format directly (one message per line) so that it can
send what no SDK would: malformed lines, huge lines, duplicate ids.  Every
line the server writes is kept and checked as it arrives: valid UTF-8,
valid JSON, a JSON-RPC 2.0 object that is a response (id with result or
error) or a notification (method, no id).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

INIT_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "psm-soak", "version": "1"}}


def proc_stat(pid):
    """(ppid, starttime, comm) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: split at the last ')'.
    r = s.rfind(")")
    comm = s[s.find("(") + 1:r]
    f = s[r + 2:].split()
    return int(f[1]), int(f[19]), comm


def all_procs():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st:
                out[int(d)] = st
    return out


def descendants(pid):
    """{pid: (starttime, comm)} of every descendant of pid."""
    procs = all_procs()
    kids = {}
    for p, (pp, _, _) in procs.items():
        kids.setdefault(pp, []).append(p)
    out, todo = {}, [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out[k] = (procs[k][1], procs[k][2])
                todo.append(k)
    return out


def status_kb(pid, field):
    """A kB field of /proc/PID/status (VmRSS, VmHWM), or -1."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def rss_kb(pid):
    return status_kb(pid, "VmRSS")


def make_root(tag="psm"):
    """A project directory the jail can enter (mkdtemp makes 0700 dirs,
    which the sandbox's unprivileged user cannot traverse)."""
    d = os.path.realpath(tempfile.mkdtemp(prefix=f"{tag}-"))
    os.chmod(d, 0o755)
    return d


class Server:
    def __init__(self, binary, root, args=(), stderr_path=None, env=None):
        self.root = root
        self.stderr_path = stderr_path or os.path.join(root, "server.stderr")
        self._err = open(self.stderr_path, "wb")
        e = dict(os.environ if env is None else env)
        e.pop("CLAUDE_PROJECT_DIR", None)
        self.p = subprocess.Popen([binary, "--root", root, *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self._err, env=e, bufsize=0)
        self.lock = threading.Condition()
        self.replies = {}        # key(id) -> [message, ...]
        self.notifications = []  # messages with a method
        self.bad = []            # (why, first 300 bytes) of lines that broke the rules
        self.nonutf8 = []        # lines that were not valid UTF-8 (first 300 bytes)
        self.lines = 0
        self.eof = False
        self.seen_procs = {}
        self._wlock = threading.Lock()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    @staticmethod
    def key(i):
        return json.dumps(i, sort_keys=True)

    def _read(self):
        f = self.p.stdout
        while True:
            line = f.readline()
            if not line:
                break
            self._take(line)
        with self.lock:
            self.eof = True
            self.lock.notify_all()

    def _take(self, raw):
        self.lines += 1
        if not raw.endswith(b"\n"):
            self.bad.append(("no newline at the end of the line", raw[:300]))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.nonutf8.append(raw[:300])
            text = raw.decode("utf-8", "replace")
        try:
            m = json.loads(text)
        except ValueError as e:
            self.bad.append((f"not JSON: {e}", raw[:300]))
            return
        why = None
        if not isinstance(m, dict) or m.get("jsonrpc") != "2.0":
            why = "not a JSON-RPC 2.0 object"
        elif "method" in m:
            if "id" in m:
                why = "the server sent a request (it never should)"
        elif "id" not in m:
            why = "a response without an id"
        elif ("result" in m) == ("error" in m):
            why = "a response needs exactly one of result and error"
        elif "error" in m:
            e = m["error"]
            if not (isinstance(e, dict) and isinstance(e.get("code"), int) and isinstance(e.get("message"), str)):
                why = "a malformed error object"
        if why:
            self.bad.append((why, raw[:300]))
            return
        with self.lock:
            if "method" in m:
                self.notifications.append(m)
            else:
                self.replies.setdefault(self.key(m["id"]), []).append(m)
            self.lock.notify_all()

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        with self._wlock:
            try:
                self.p.stdin.write(data)
                return True
            except (BrokenPipeError, OSError):
                return False

    def send(self, obj):
        return self.send_raw(json.dumps(obj, separators=(",", ":")) + "\n")

    def wait_reply(self, rid, timeout=60.0):
        k = self.key(rid)
        end = time.monotonic() + timeout
        with self.lock:
            while not self.replies.get(k):
                left = end - time.monotonic()
                if left <= 0 or self.eof:
                    return None
                self.lock.wait(min(left, 0.5))
            return self.replies[k][0]

    def request(self, rid, method, params=None, timeout=60.0):
        m = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            m["params"] = params
        self.send(m)
        return self.wait_reply(rid, timeout)

    def initialize(self, timeout=30.0):
        r = self.request("init", "initialize", INIT_PARAMS, timeout)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, rid, tool, args, timeout=120.0, meta=None):
        params = {"name": tool, "arguments": args}
        if meta:
            params["_meta"] = meta
        return self.request(rid, "tools/call", params, timeout)

    def count(self, rid):
        with self.lock:
            return len(self.replies.get(self.key(rid), []))

    def alive(self):
        return self.p.poll() is None

    def snapshot_procs(self):
        d = descendants(self.p.pid)
        self.seen_procs.update(d)
        return d

    def rss_kb(self):
        return rss_kb(self.p.pid)

    def close(self, timeout=30.0):
        """Ends input; returns the exit status (None if it had to be killed)."""
        if self.alive():
            self.snapshot_procs()
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        self.t.join(5)
        self._err.close()
        return rc

    def leftovers(self, grace=5.0):
        """Processes of the server's tree still alive after it exited."""
        end = time.monotonic() + grace
        while True:
            left = {}
            for p, (start, comm) in self.seen_procs.items():
                st = proc_stat(p)
                if st and st[1] == start:
                    left[p] = comm
            if not left or time.monotonic() > end:
                return left
            time.sleep(0.2)

    def stderr_tail(self, n=2000):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


def kill_tree_safely(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def rmtree(d):
    shutil.rmtree(d, ignore_errors=True)
