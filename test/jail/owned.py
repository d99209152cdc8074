# What the sandbox's effective uid owns on the host, judged from outside the
# policy: all of root's files and processes when a root server runs without
# namespaces (the code keeps the effective uid 0, without capabilities).
# argv: mode root_only_file root_owned_readable_file outside_dir host_pid
# (the root-only file: mode 0600, outside everything the policy shows).
import os, sys, errno, fcntl, ctypes, array
mode, secret, data, outside, hpid = sys.argv[1:6]
nsfree = mode == "nsfree"
libc = ctypes.CDLL(None, use_errno=True)
bad = []
def refused(name, fn, want=None):
    try:
        fn()
    except OSError as e:
        if want and e.errno not in want:
            bad.append("%s: errno %d" % (name, e.errno))
        return
    bad.append(name)
refused("read a root-only file outside the policy", lambda: open(secret).read())
refused("list a directory outside the policy", lambda: os.listdir(outside))
# A lease on a file it owns and may read: a writer of the file on the host
# (the agent's editor, the package manager) would wait 45 s for it.
fd = os.open(data, os.O_RDONLY)
refused("F_SETLEASE", lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK), (errno.EPERM, errno.EACCES))
# ioctls that check ownership or write permission themselves, on a
# descriptor opened for reading: nothing but the filter stops them without
# the read-only binds (fs-verity makes the file immutable, a btrfs subvolume
# is a directory made where Landlock allows none).
FS_IOC_SETVERSION, FS_IOC_ENABLE_VERITY = 0x40087602, 0x40806685
BTRFS_IOC_SUBVOL_CREATE = 0x5000940e
if nsfree:
    buf = array.array("l", [0])
    refused("FS_IOC_SETVERSION", lambda: fcntl.ioctl(fd, FS_IOC_SETVERSION, buf), (errno.EPERM,))
    refused("FS_IOC_ENABLE_VERITY", lambda: fcntl.ioctl(fd, FS_IOC_ENABLE_VERITY, bytes(128)), (errno.EPERM,))
    dfd = os.open(os.path.dirname(data), os.O_RDONLY | os.O_DIRECTORY)
    refused("BTRFS_IOC_SUBVOL_CREATE", lambda: fcntl.ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, bytearray(4096)), (errno.EPERM,))
    # The ioctls the stack uses still answer (isatty's TCGETS: ENOTTY).
    if os.isatty(fd): bad.append("isatty")
    try:
        fcntl.ioctl(fd, 0x5401, bytes(64))   # TCGETS
    except OSError as e:
        if e.errno != errno.ENOTTY: bad.append("TCGETS: errno %d" % e.errno)
# inotify reports the names of what happens in any directory the uid may
# read, and Landlock does not see it: refused without the mount tree.
ifd = libc.inotify_init1(0)
if ifd >= 0 and libc.inotify_add_watch(ifd, outside.encode(), 0xfff) >= 0:
    bad.append("inotify on a directory outside the policy")
# /proc: root's sysctls and other processes' settings are root's to write.
def write_back(p):
    def f():
        v = open(p).read()
        with open(p, "w") as w: w.write(v)
    return f
refused("write /proc/sys/vm/swappiness", write_back("/proc/sys/vm/swappiness"))
refused("write a host process's oom_score_adj", write_back("/proc/%s/oom_score_adj" % hpid))
refused("signal a host process", lambda: os.kill(int(hpid), 0))
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("what the uid owns stays out of reach")
