# Other processes' scheduling, priority, memory placement and identity: a
# cell may change its own (pid 0), never another process's, whether that is
# a host process of the sandbox's own uid (without namespaces) or the zygote
# (ns pid 1 with namespaces).  pidfd_open is refused whatever the pid.
# argv: MODE HOSTPID (a host `sleep` of the sandbox's uid; run.sh checks it
# from outside afterwards: taskset, nice, ionice, chrt, oom_score_adj).
import os, sys, ctypes, errno
mode, host = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
bad = []
zyg = os.getppid()  # the jail's zygote (jailrun): pid 1 with namespaces
# With namespaces a host pid names nothing here: ESRCH is as good a refusal.
REFUSED = (errno.EPERM, errno.EACCES, errno.ESRCH)


def sc(name, *args, want=REFUSED):
    r = libc.syscall(*args)
    e = ctypes.get_errno()
    if r >= 0 or e not in want:
        bad.append("%s: r=%d errno=%d" % (name, r, e))


mask = ctypes.c_ulong(1)
param = ctypes.c_int(0)
attr = (ctypes.c_uint32 * 14)(56, 5)            # size 56, SCHED_IDLE
nodes = ctypes.c_ulong(1)
for tag, pid in (("host", host), ("zygote", zyg), ("host-highbits", host | (1 << 32))):
    sc("sched_setaffinity-" + tag, 203, pid, 8, ctypes.byref(mask))
    sc("setpriority-" + tag, 141, 0, pid, 19)                     # PRIO_PROCESS
    sc("sched_setscheduler-" + tag, 144, pid, 5, ctypes.byref(param))  # SCHED_IDLE
    sc("sched_setparam-" + tag, 142, pid, ctypes.byref(param))
    sc("sched_setattr-" + tag, 314, pid, attr, 0)
    sc("ioprio_set-" + tag, 251, 1, pid, 3 << 13)                 # WHO_PROCESS, idle class
    sc("migrate_pages-" + tag, 256, pid, 64, ctypes.byref(nodes), ctypes.byref(nodes))
    sc("move_pages-" + tag, 279, pid, 0, 0, 0, 0, 0)
    sc("kcmp-" + tag, 312, os.getpid(), pid, 0, 0, 0)             # KCMP_FILE
    sc("pidfd_open-" + tag, 434, pid, 0, want=(errno.EPERM,))
    sc("prctl-sched-core-" + tag, 157, 62, 2, pid, 0, 0)          # PR_SCHED_CORE_SHARE_TO
sc("pidfd_open-self", 434, os.getpid(), 0, want=(errno.EPERM,))
sc("process_madvise", 440, 0, 0, 0, 0, 0)
sc("get_robust_list-zygote", 274, zyg, ctypes.byref(mask), ctypes.byref(mask))
try:
    os.pidfd_open(host)
    bad.append("os.pidfd_open(host)")
except PermissionError:
    pass
except ProcessLookupError:
    bad.append("os.pidfd_open reached the kernel's lookup (not refused by the filter)")
# The writable /proc files of another process of the same uid.
for f in ("oom_score_adj", "autogroup", "timerslack_ns"):
    for pid in (host, zyg):
        try:
            with open("/proc/%d/%s" % (pid, f), "w") as fh:
                fh.write("1000" if f == "oom_score_adj" else "19" if f == "autogroup" else "50000000")
            bad.append("wrote /proc/%d/%s" % (pid, f))
        except OSError:
            pass
# Its own: allowed (OpenBLAS pins its threads so).
cpus = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cpus)})
if os.sched_getaffinity(0) != {min(cpus)}:
    bad.append("its own affinity did not change")
os.sched_setaffinity(0, cpus)
os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + 1))  # its own, lower: allowed
if bad:
    print("ESCAPED:", bad)
    sys.exit(1)
print("scheduling of other processes refused")
