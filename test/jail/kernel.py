# The kernel surface the sandbox must not reach.
import os, sys, ctypes, errno, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
bad = []
def sc(name, *args, want=(errno.EPERM, errno.EACCES)):
    r = libc.syscall(*args)
    e = ctypes.get_errno()
    if r >= 0 or e not in want:
        bad.append("%s: r=%d errno=%d" % (name, r, e))
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
sc("unshare", 272, CLONE_NEWUSER)
sc("unshare-ns", 272, CLONE_NEWNS)
sc("clone-newuser", 56, CLONE_NEWUSER | 17, 0, 0, 0, 0)
sc("clone3", 435, 0, 0, want=(errno.ENOSYS,))
sc("setns", 308, 0, 0)
sc("chroot", 161, b"/tmp")
sc("mount", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
sc("keyctl", 250, 0, 0, 0, 0, 0)
sc("add_key", 248, b"user", b"x", b"y", 1, -2)
sc("bpf", 321, 0, 0, 0)
sc("userfaultfd", 323, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("personality", 135, 0x0040000)                  # ADDR_NO_RANDOMIZE
sc("ptrace-attach", 101, 16, 1, 0, 0)              # PTRACE_ATTACH the zygote
sc("ptrace-traceme", 101, 0, 0, 0, 0)
sc("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
sc("pidfd_getfd", 438, 0, 0, 0)
sc("open_by_handle_at", 304, 0, 0, 0)
sc("prlimit-zygote", 302, 1, 7, 0, 0)               # prlimit64(1, RLIMIT_NOFILE)
sc("setpriority-zygote", 141, 0, 1, 10)
sc("tiocsti", 16, 0, 0x5412, ctypes.c_char_p(b"x"))
sc("tiocsti-highbits", 16, 0, 0x5412 | (1 << 32), ctypes.c_char_p(b"x"))
sc("tioclinux", 16, 0, 0x541C, 0)
# The personality query stays.  As an unsigned 64-bit value: ctypes passes a
# plain int as a 32-bit C int, whose upper half a container runtime's seccomp
# filter (which allows exactly 0xffffffff) would see as garbage.
assert libc.syscall(135, ctypes.c_ulong(0xffffffff)) >= 0
try:
    os.kill(1, 0); bad.append("signal the zygote")  # Landlock signal scope
except PermissionError:
    pass
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096)); bad.append("raise NOFILE")
except (ValueError, OSError):
    pass
in_container = "container" in sys.argv[1:]
def status():
    """The kernel's view of this process: /proc/self/status; where the jail
    has no /proc (inside a container whose runtime masks parts of its /proc,
    the kernel refuses a new proc in a user namespace), only accepted in a
    container, the same fields from prctl and capget."""
    try:
        return dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    except FileNotFoundError:
        if not in_container:
            raise
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()               # 2 x (effective, permitted, inheritable)
    if libc.syscall(125, hdr, data) != 0:
        bad.append("capget")
    cap = lambda i: "%x" % (data[i] | data[i + 3] << 32)
    bnd = sum(1 << c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1)   # PR_CAPBSET_READ
    amb = sum(1 << c for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1)   # PR_CAP_AMBIENT_IS_SET
    return {"NoNewPrivs": str(libc.prctl(39, 0, 0, 0, 0)), "Seccomp": str(libc.prctl(21, 0, 0, 0, 0)),
            "CapEff": cap(0), "CapPrm": cap(1), "CapInh": cap(2), "CapBnd": "%x" % bnd, "CapAmb": "%x" % amb}
st = status()
if st["NoNewPrivs"].strip() != "1": bad.append("NoNewPrivs")
if st["Seccomp"].strip() != "2": bad.append("Seccomp")
# The bounding set: dropped where the jail holds CAP_SETPCAP (root, or its
# own user namespace).  A user without namespaces (mode nsfree) cannot drop
# it and needs not: no_new_privs means no execve can gain anything.
nsfree_user = len(sys.argv) > 1 and sys.argv[1] == "nsfree" and os.getuid() != 0
if int(st["CapEff"], 16) != 0 or int(st["CapPrm"], 16) != 0 or int(st["CapInh"], 16) != 0 or int(st["CapAmb"], 16) != 0: bad.append("caps")
if int(st["CapBnd"], 16) != 0 and not nsfree_user: bad.append("bounding set")
# Never root by the real or saved uid (RLIMIT_NPROC would not count it, the
# kernel exempts the real uid 0).  The effective uid is 0 only for a root
# server without namespaces whose project is root's (jail/uid.c): no
# capability, and no way to change any of the ids back.
ru, eu, su = os.getresuid()
if ru == 0 or su == 0: bad.append("real or saved uid 0")
if eu == 0 and not (len(sys.argv) > 1 and sys.argv[1] == "nsfree" and ru == 65534): bad.append("uid 0")
for name, fn in (("setresuid", lambda: os.setresuid(0, 0, 0)), ("setuid", lambda: os.setuid(0)),
                 ("setreuid", lambda: os.setreuid(0, 0)), ("setreuid-real", lambda: os.setreuid(eu, -1)),
                 ("setresgid", lambda: os.setresgid(0, 0, 0)), ("setgroups", lambda: os.setgroups([0]))):
    try:
        fn(); bad.append(name)
    except OSError:
        pass
if os.getresuid() != (ru, eu, su): bad.append("ids changed: %s" % (os.getresuid(),))
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("kernel surface refused")
