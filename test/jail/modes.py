# argv: workspace outside_setuid_file mode(ns|nsfree)
# Every way to leave a setuid or setgid file, a group- or world-writable
# file or directory, or an ACL on the host; each must be refused.  run.sh
# also checks the workspace from outside afterwards.
import ctypes, errno, os, shutil, stat, struct, sys, tarfile, io
ws, outside_suid = sys.argv[1], sys.argv[2]
nsfree = sys.argv[3:] == ["nsfree"]   # chmod refused whatever the mode there
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD = -100
bad = []
def refused(name, fn, want=(errno.EPERM, errno.EACCES)):
    try:
        r = fn()
    except OSError as e:
        if e.errno not in want: bad.append("%s: errno %d" % (name, e.errno))
        return
    if isinstance(r, int) and r < 0:
        if ctypes.get_errno() not in want: bad.append("%s: errno %d" % (name, ctypes.get_errno()))
        return
    bad.append(name)
def sc(*args):
    return libc.syscall(*[a.encode() if isinstance(a, str) else a for a in args])
p = lambda n: os.path.join(ws, n)
shutil.copyfile("/usr/bin/id", p("c"))                        # ordinary copy works
for m in (0o6755, 0o4755, 0o2755, 0o1755, 0o777, 0o775, 0o757):
    refused("chmod %o" % m, lambda: os.chmod(p("c"), m))
if not nsfree:
    os.chmod(p("c"), 0o700); os.chmod(p("c"), 0o755)          # narrowing and 755 stay
fd = os.open(p("c"), os.O_RDONLY)
refused("fchmod", lambda: os.fchmod(fd, 0o4755))
refused("fchmodat", lambda: sc(268, AT_FDCWD, p("c"), 0o4755))
refused("fchmodat2", lambda: sc(452, AT_FDCWD, p("c"), 0o4755, 0), want=(errno.ENOSYS,))
refused("chmod /proc/self/fd", lambda: os.chmod("/proc/self/fd/%d" % fd, 0o2755))
os.close(fd)
refused("open O_CREAT 4755", lambda: os.open(p("o1"), os.O_CREAT | os.O_WRONLY, 0o4755))
refused("open syscall", lambda: sc(2, p("o2"), os.O_CREAT | os.O_WRONLY, 0o6777))
refused("openat syscall", lambda: sc(257, AT_FDCWD, p("o3"), os.O_CREAT | os.O_WRONLY, 0o2755))
refused("O_TMPFILE 4755", lambda: sc(257, AT_FDCWD, ws, os.O_TMPFILE | os.O_WRONLY, 0o4755))
refused("creat", lambda: sc(85, p("o4"), 0o4755))
how = struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o4755, 0)
refused("openat2", lambda: sc(437, AT_FDCWD, p("o5"), how, len(how)), want=(errno.ENOSYS,))
refused("mkdir 2755", lambda: os.mkdir(p("d1"), 0o2755))
refused("mkdirat 6777", lambda: sc(258, AT_FDCWD, p("d2"), 0o6777))
refused("mknod reg 4755", lambda: os.mknod(p("n1"), stat.S_IFREG | 0o4755))
refused("mknodat reg 2755", lambda: sc(259, AT_FDCWD, p("n2"), stat.S_IFREG | 0o2755, 0))
refused("mknod char", lambda: os.mknod(p("n3"), stat.S_IFCHR | 0o666, os.makedev(1, 3)))
refused("mknod block", lambda: os.mknod(p("n4"), stat.S_IFBLK | 0o666, os.makedev(7, 0)))
os.mkdir(p("sub"))
refused("setgid directory", lambda: os.chmod(p("sub"), 0o2775))
refused("workspace 0777", lambda: os.chmod(ws, 0o777))
refused("workspace 0775", lambda: os.chmod(ws, 0o775))
refused("workspace sticky", lambda: os.chmod(ws, 0o1777))
refused("umask 0", lambda: os.umask(0))
refused("umask 002", lambda: os.umask(0o002))
os.umask(0o077); os.umask(0o022)                               # tightening stays
with open(p("u1"), "w") as f: f.write("x")                    # 0666 & ~umask
# ACLs and file capabilities: a minimal ACL is the mode (rwx for everyone),
# an extended one adds a named user and a mask.
def mkacl(*entries):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, 7, i) for t, i in entries)
U = 0xffffffff
acl = mkacl((1, U), (4, U), (0x20, U))
acl_ext = mkacl((1, U), (2, os.getuid()), (4, U), (0x10, U), (0x20, U))
refused("acl extended", lambda: os.setxattr(p("c"), "system.posix_acl_access", acl_ext),
        want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
for target in (ws, p("c"), p("sub")):
    refused("acl access " + target, lambda: os.setxattr(target, "system.posix_acl_access", acl),
            want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
refused("acl default", lambda: os.setxattr(ws, "system.posix_acl_default", acl),
        want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
refused("acl lsetxattr", lambda: os.setxattr(p("c"), "system.posix_acl_access", acl, follow_symlinks=False),
        want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
fd = os.open(p("c"), os.O_RDONLY)
refused("acl fsetxattr", lambda: os.setxattr(fd, "system.posix_acl_access", acl),
        want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
os.close(fd)
cap = struct.pack("<IIIII", 0x02000000 | 1, 0xffffffff, 0, 0xffffffff, 0)   # VFS_CAP_REVISION_2, all
refused("file capability", lambda: os.setxattr(p("c"), "security.capability", cap),
        want=(errno.EPERM, errno.EACCES, errno.EOPNOTSUPP))
# A hard link to a setuid file outside the workspace.
refused("hardlink to outside setuid", lambda: os.link(outside_suid, p("hl")),
        want=(errno.EPERM, errno.EACCES, errno.EXDEV, errno.ENOENT))
# tarfile keeps extracting when a member's mode is refused.
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    for name, mode in (("t/suid", 0o4755), ("t/gw", 0o664), ("t/plain", 0o644)):
        ti = tarfile.TarInfo(name); ti.size = 1; ti.mode = mode
        t.addfile(ti, io.BytesIO(b"x"))
buf.seek(0)
with tarfile.open(fileobj=buf) as t:
    t.extractall(ws)
assert open(p("t/plain")).read() == "x"
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("modes refused")
