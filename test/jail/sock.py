# argv: mode(ns|nsfree) prefix...  (host sockets PREFIX.s stream, PREFIX.d datagram, and the
# abstract name basename(PREFIX): see hostsock.py)
# With net_access false none of them may be reached, by any call; pipes,
# socketpair and multiprocessing.Pool keep working.
import ctypes, errno, multiprocessing, os, socket, sys
bad = []
def refused(name, fn):
    try:
        fn()
    except OSError:
        return
    bad.append(name)
def conn(path, kind):
    s = socket.socket(socket.AF_UNIX, kind); s.settimeout(2)
    try: s.connect(path); s.send(b"x")
    finally: s.close()
def dgram_sendto(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try: s.sendto(b"x", path)
    finally: s.close()
def pair(kind, how, path):
    # A connected pair may ignore the address and deliver to its peer:
    # only delivery elsewhere is an escape (the listener's log, outside).
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    try:
        if how == "sendto": a.sendto(b"x", path)
        elif how == "sendmsg": a.sendmsg([b"x"], [], 0, path)
        else: a.connect(path); a.send(b"x")
        b.settimeout(1)
        if b.recv(1) != b"x": raise AssertionError
        raise OSError("delivered to the peer")
    finally: a.close(); b.close()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nsfree = sys.argv[1] == "nsfree"
for pre in sys.argv[2:]:
    ab = "\0" + os.path.basename(pre)
    for path in (pre + ".s", pre + ".d", ab):
        refused("connect stream " + path, lambda: conn(path, socket.SOCK_STREAM))
        refused("connect dgram " + path, lambda: conn(path, socket.SOCK_DGRAM))
        refused("connect seqpacket " + path, lambda: conn(path, socket.SOCK_SEQPACKET))
        refused("sendto " + path, lambda: dgram_sendto(path))
        for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM):
            for how in ("sendto", "sendmsg", "connect"):
                refused("socketpair %d %s %s" % (kind, how, path), lambda: pair(kind, how, path))
if libc.syscall(41, 1, 1, 0) >= 0: bad.append("raw socket(AF_UNIX) syscall")
if libc.syscall(41, 1 | (1 << 32), 2, 0) >= 0: bad.append("socket(AF_UNIX) high bits")
# What must keep working.
r, w = os.pipe(); os.write(w, b"ok"); assert os.read(r, 2) == b"ok"
a, b = socket.socketpair(); a.send(b"ok"); assert b.recv(2) == b"ok"
c, d = multiprocessing.Pipe(); c.send([1, 2]); assert d.recv() == [1, 2]
if not nsfree:   # POSIX semaphores need the private /dev/shm
    with multiprocessing.Pool(2) as pool:
        assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("host sockets unreachable; pipes, socketpair and Pool work")
