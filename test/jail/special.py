# argv: data_file dir...
# No symlink, FIFO, socket or device node may be created in any of the
# host directories given, and no hard link to a file outside them.  run.sh
# checks the directories from outside too.
import errno, os, socket, stat, sys
data, dirs = sys.argv[1], sys.argv[2:]
bad = []
def refused(name, fn):
    try:
        fn()
    except OSError as e:
        if e.errno in (errno.EPERM, errno.EACCES, errno.EXDEV, errno.EROFS):
            return
        bad.append("%s: errno %d %s" % (name, e.errno, e.strerror)); return
    bad.append(name)
def bind(path, kind):
    s = socket.socket(socket.AF_UNIX, kind)
    try: s.bind(path)
    finally: s.close()
for d in dirs:
    j = lambda n: os.path.join(d, n)
    refused(j("symlink"), lambda: os.symlink("/root/.ssh/id_rsa", j("result.txt")))
    refused(j("symlink relative"), lambda: os.symlink("../data.csv", j("rel-link")))
    refused(j("symlink dangling"), lambda: os.symlink(j("nowhere"), j("dangling")))
    refused(j("mkfifo"), lambda: os.mkfifo(j("fifo")))
    refused(j("mknod fifo"), lambda: os.mknod(j("fifo2"), stat.S_IFIFO | 0o600))
    refused(j("mknod socket"), lambda: os.mknod(j("sock2"), stat.S_IFSOCK | 0o600))
    refused(j("mknod char"), lambda: os.mknod(j("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3)))
    refused(j("mknod block"), lambda: os.mknod(j("loop"), stat.S_IFBLK | 0o666, os.makedev(7, 0)))
    refused(j("bind stream"), lambda: bind(j("sock"), socket.SOCK_STREAM))
    refused(j("bind dgram"), lambda: bind(j("dsock"), socket.SOCK_DGRAM))
    def pair_bind():
        a, b = socket.socketpair()
        try: a.bind(j("pair-sock"))
        finally: a.close(); b.close()
    refused(j("bind socketpair"), pair_bind)
    refused(j("hardlink outside"), lambda: os.link(data, j("hl")))
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("special files refused")
