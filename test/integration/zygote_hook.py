# Code the tests put into the real zygote (hostile_zygote.test.mjs), where an
# installed module's import-time code runs (and a venv's .pth files once did):
# after the jail is built, before the zygote says it is ready.  It plays a
# zygote that runs code nobody approved.  The server runs it through its
# test hook (PSM_TEST_ZYGOTE_HOOK, which defines `ctrl` and `pidfd`), or,
# to try an older binary, from a .pth file of a --venv (then it finds its
# socket itself, and opens the victim's pidfd where the jail lets it).
#
# WORKSPACE/.hook-plan says what to do: {"frames": [STEP...], "victim": PID,
# "modules": BOOL}.  Each STEP is one forged frame, written by the zygote
# itself right after one of its spawns (never its first), before it reports
# that spawn; the count of frames sent is kept in WORKSPACE/.hook-step
# across the zygotes the server starts, and what was done is appended to
# WORKSPACE/.hook-log.  Steps:
#   spawned  W_SPAWNED for a session the server never asked for, with the
#            victim's pidfd
#   ready    a second W_READY whose scratch path climbs out
#   exited   W_EXITED for each live session
# With "modules", installed modules misbehave at import (as the hook makes
# them): colorsys runs a test discovery in its working directory; wave
# runs WORKSPACE/planted.py in the warm-up's probe; mailbox runs
# WORKSPACE/planted_zygote.py in the zygote itself and then fails.
import json
import os
import socket
import struct

try:
    import _psm

    WS = os.path.dirname(_psm._cfg["outputs_dir"])
except Exception:
    WS = os.path.join(os.getcwd(), "workspace")

MAGIC = 0x50534D31
W_READY, W_SPAWNED, W_EXITED = 21, 22, 23


def log(msg):
    with open(os.path.join(WS, ".hook-log"), "a") as f:
        f.write("%d %s\n" % (os.getpid(), msg))


def find_ctrl():
    """The zygote's socket: the one socket past stdin, stdout and stderr
    (which may be sockets too: the client's pipes)."""
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2):
        try:
            if os.readlink("/proc/self/fd/%d" % fd).startswith("socket:"):
                return fd
        except OSError:
            pass
    return -1


_g = globals()
CTRL = _g.get("ctrl", -1)
if CTRL < 0:
    CTRL = find_ctrl()
PIDFD = _g.get("pidfd", -1)

with open(os.path.join(WS, ".hook-plan")) as f:
    PLAN = json.load(f)
STEP_FILE = os.path.join(WS, ".hook-step")


def next_step():
    """The next forged frame of the plan, counted across every zygote the
    server starts (a zygote the server does not replace goes on to the
    next one at its next spawn)."""
    k = 0
    if os.path.exists(STEP_FILE):
        with open(STEP_FILE) as f:
            k = int(f.read() or 0)
    frames = PLAN.get("frames", [])
    if k >= len(frames):
        return None
    with open(STEP_FILE, "w") as f:
        f.write(str(k + 1))
    return frames[k]


VICTIM = PLAN.get("victim")
if PIDFD < 0 and VICTIM:
    try:
        PIDFD = os.pidfd_open(VICTIM)
    except OSError as e:
        log("no pidfd of the victim: %s" % e)


def send(t, body, fds=()):
    data = json.dumps(body).encode()
    s = socket.socket(fileno=os.dup(CTRL))
    try:
        socket.send_fds(s, [struct.pack("<III", MAGIC, t, len(data)) + data], list(fds))
    finally:
        s.close()


def title(pid="self"):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def kids():
    me = os.getpid()
    try:
        with open("/proc/%d/task/%d/children" % (me, me)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def sessions():
    """The zygote's children that are sessions (a session that is forking
    its checkpoint has the checkpoint's title for that moment, and, while
    it changes title, none this read can tell)."""
    return [p for p in kids() if ": session " in title(p) or ": checkpoint " in title(p)]


def spawned():
    # Logged first: the server may end this process as soon as it reads it.
    log("sending W_SPAWNED for id 999999 with pidfd %d" % PIDFD)
    send(W_SPAWNED, {"id": 999999, "pid": 4242}, [PIDFD] if PIDFD >= 0 else [])


def ready(step):
    log("sending W_READY with scratch %s" % step["scratch"])
    send(W_READY, {"enforceable": True, "nsfree": True, "jail": "", "why": "", "start_ms": 1,
                   "scratch": step["scratch"]})


def exited():
    # Every child, with its title, for the log: which sessions were found.
    log("children: %s" % ", ".join("%d (%s)" % (p, title(p)) for p in kids()))
    for pid in sessions():
        send(W_EXITED, {"pid": pid, "status": 0, "epoch": 0})
        log("sent W_EXITED for pid %d (%s)" % (pid, title(pid)))


def after_fork(count=[0], zygote=os.getpid()):
    """In the zygote itself, right after each spawn but its first, before
    it reports that spawn: the next frame of the plan comes in the stream
    between two of the zygote's own, as code in the zygote would write it."""
    if os.getpid() != zygote:
        return  # a session, a checkpoint: they inherit the hook
    count[0] += 1
    if count[0] < 2:
        return
    try:
        step = next_step()
        do = step and step.get("do")
        if do == "spawned":
            spawned()
        elif do == "ready":
            ready(step)
        elif do == "exited":
            exited()
    except BaseException as e:
        log("failed: %r" % (e,))


log("loaded")
if PLAN.get("frames"):
    os.register_at_fork(after_in_parent=after_fork)
if PLAN.get("modules"):
    import importlib

    _real = importlib.import_module

    def _run(path):
        with open(path) as f:
            src = f.read()
        exec(compile(src, path, "exec"), {"__name__": "planted", "__file__": path})

    def import_module(name, package=None):
        m = _real(name, package)
        me = title()
        if name == "colorsys":
            import unittest

            unittest.main(module=None, argv=["python", "discover"], exit=False)
        elif name == "wave" and "warm-up probe" in me:
            _run(os.path.join(WS, "planted.py"))
        elif name == "mailbox" and me.endswith(": zygote"):
            _run(os.path.join(WS, "planted_zygote.py"))
            raise ImportError("mailbox failed after it ran code from the workspace")
        return m

    importlib.import_module = import_module
