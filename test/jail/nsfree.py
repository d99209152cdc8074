# The namespace-free mode's own rules (Landlock + seccomp, no mount tree):
# metadata of files the sandbox's uid owns outside the workspace, SysV IPC
# and POSIX message queues, unix sockets, the private scratch directory.
# argv: root workspace ; prints "scratch DIR" for the outside check.
import os, sys, ctypes, errno, fcntl, socket, tempfile, array
root, ws = sys.argv[1:3]
data = root + "/data.csv"
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
bad = []
def refused(name, fn):
    try:
        fn()
    except OSError:
        return
    bad.append(name)
refused("chmod", lambda: os.chmod(data, 0o600))
refused("chmod-fd", lambda: os.fchmod(os.open(data, os.O_RDONLY), 0o600))
refused("utime", lambda: os.utime(data, (0, 0)))
refused("utime-fd", lambda: os.utime(os.open(data, os.O_RDONLY), (1, 1)))
refused("chown-own-ids", lambda: os.chown(data, os.getuid(), os.getgid()))
refused("setxattr", lambda: os.setxattr(data, "user.psm", b"x"))
refused("setxattr-fd", lambda: os.setxattr(os.open(data, os.O_RDONLY), "user.psm", b"x"))
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602
def chattr():
    fd = os.open(data, os.O_RDONLY)
    buf = array.array("l", [0])
    fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf, True)
    buf[0] |= 0x00004000  # FS_NODUMP_FL: no capability needed for the owner
    fcntl.ioctl(fd, FS_IOC_SETFLAGS, buf, True)
refused("chattr", chattr)
def sysv(nr, *a):
    def f():
        r = libc.syscall(nr, *a)
        if r < 0:
            raise OSError(ctypes.get_errno(), "refused")
    return f
refused("shmget", sysv(29, 0, 4096, 0o1600))     # IPC_PRIVATE | IPC_CREAT
refused("semget", sysv(64, 0, 1, 0o1600))
refused("msgget", sysv(68, 0, 0o1600))
refused("mq_open", sysv(240, b"psm-test", os.O_CREAT | os.O_RDWR, 0o600, None))
refused("unix-socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
a, b = socket.socketpair()                        # stays
a.close(); b.close()
# Scratch space: TMPDIR is private, not the host's /tmp.
tmp = tempfile.gettempdir()
if tmp in ("/tmp", "/var/tmp") or not os.path.isdir(tmp):
    bad.append("TMPDIR is %s" % tmp)
st = os.stat(tmp)
# Its owner's alone; with the effective uid 0 (a root server's sandbox of a
# root-owned project) also its real gid's, which access(2) answers for.
euid0 = os.geteuid() == 0 and os.getuid() != 0
if (st.st_mode & 0o777 != (0o770 if euid0 else 0o700) or st.st_uid != os.geteuid()
        or (euid0 and st.st_gid != os.getgid())):
    bad.append("TMPDIR mode %o owner %d:%d" % (st.st_mode & 0o777, st.st_uid, st.st_gid))
# sqlite's temporary files go where access(2) (real ids) allows writing.
import sqlite3
db = sqlite3.connect(os.path.join(ws, "t.sqlite"))
db.execute("pragma temp_store=file")
db.execute("create table t(x)"); db.executemany("insert into t values (?)", [(i,) for i in range(1000)])
db.execute("create temp table u as select * from t order by x desc"); db.commit(); db.close()
os.unlink(os.path.join(ws, "t.sqlite"))
fd, p = tempfile.mkstemp()
os.write(fd, b"x"); os.close(fd)
refused("host /tmp", lambda: open("/tmp/psm-nsfree-probe", "w"))
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("scratch", tmp)
print("namespace-free rules hold")
