# Every write outside what the policy makes writable must fail.
# argv: root workspace outside_file
import os, sys, ctypes
root, ws, outside = sys.argv[1:4]
data = root + "/data.csv"
bad = []
def attempt(name, fn):
    try:
        fn()
    except OSError:
        return
    bad.append(name)
def w(path, mode="w"):
    with open(path, mode) as f: f.write("pwned")
attempt("relative", lambda: w("rel.txt"))
attempt("relative-parent", lambda: w("../parent.txt"))
attempt("absolute-new", lambda: w(root + "/new.txt"))
attempt("append", lambda: w(data, "a"))
attempt("o_trunc", lambda: os.close(os.open(data, os.O_WRONLY | os.O_TRUNC)))
attempt("truncate", lambda: os.truncate(data, 0))
attempt("chmod", lambda: os.chmod(data, 0o777))
attempt("utime", lambda: os.utime(data, (0, 0)))
attempt("unlink", lambda: os.unlink(data))
attempt("mkdir", lambda: os.mkdir(root + "/d"))
attempt("rename-out", lambda: os.rename(data, ws + "/moved.csv"))
attempt("hardlink", lambda: os.link(data, ws + "/hl.csv"))
def via_symlink():
    os.symlink(data, ws + "/sl.csv")
    w(ws + "/sl.csv", "a")
attempt("symlink", via_symlink)
def dangling():
    os.symlink(root + "/created-through-link.txt", ws + "/dl")
    w(ws + "/dl")
attempt("dangling-symlink", dangling)
attempt("outside-file", lambda: w(outside, "a"))
attempt("outside-dir", lambda: w(os.path.dirname(outside) + "/new.txt"))
attempt("usr", lambda: w("/usr/pwned"))
attempt("etc", lambda: w("/etc/pwned"))
attempt("slash", lambda: w("/pwned"))
attempt("proc-sys", lambda: w("/proc/sys/kernel/hostname"))
# /tmp and /dev/shm are the jail's private tmpfs: allowed, but the host's
# must not see them (checked from outside).
for d in ("/tmp", "/dev/shm"):
    try: w(d + "/" + os.path.basename(outside) + ".private")
    except OSError: pass
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("writes refused")
