# argv: canary_path canary_value mode host_pid
import os, sys, glob
path, value = sys.argv[1], sys.argv[2][::-1]   # reversed: not in our own cmdline
nsfree = len(sys.argv) > 3 and sys.argv[3] == "nsfree"
# A host process started by the suite, the canary on its command line.
hpid = sys.argv[4] if len(sys.argv) > 4 else None
found = []
try:
    open(path).read(); found.append("home canary readable")
except OSError:
    pass
try:
    os.listdir(os.path.dirname(path)); found.append("home dir listable")
except OSError:
    pass
if any(value in v for v in os.environ.values()): found.append("os.environ")
for f in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        if value.encode() in open(f, "rb").read(): found.append(f)
    except OSError:
        pass
# Other processes' entries in /proc: with a pid namespace they are not
# there; without one the session's Landlock domain grants only its own.
# Neither command line nor status nor stat, not even the list of pids.
for f in ("cmdline", "status", "stat", "comm", "environ", "sched", "io"):
    # In the pid namespace pid 1 and the parent are the jail's own.
    for pid in filter(None, (hpid,) + (("1", str(os.getppid())) if nsfree else ())):
        try:
            open("/proc/%s/%s" % (pid, f), "rb").read()
            found.append("/proc/%s/%s readable" % (pid, f))
        except OSError:
            pass
pids = []
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    if nsfree: found.append("/proc listable")
except OSError:
    if not nsfree: found.append("/proc not listable")
if len(pids) > 10: found.append("host processes visible: %d" % len(pids))
for p in pids:
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read()
        if b"bash" in cmd or b"run.sh" in cmd or b"psm-canary" in cmd: found.append("host process " + p)
    except OSError:
        pass
# Its own entry stays readable (threads, memory, descriptors), where the jail
# has a /proc: inside a container the namespace mode may have none (see
# session.py), and then nothing of any process is there.
try:
    no_proc = os.path.isdir("/proc") and not os.listdir("/proc")
except OSError:  # the namespace-free mode: /proc is there, its list refused
    no_proc = False
if not no_proc:
    try:
        open("/proc/self/status").read(); os.listdir("/proc/self/fd"); open("/proc/self/maps").read()
        open("/proc/thread-self/stat").read()
    except OSError as e:
        found.append("own /proc entry refused: %s" % e)
try:
    if "root:" in open("/etc/passwd").read(): found.append("host /etc/passwd")
except OSError:
    pass
if found:
    print("LEAKED:", found); sys.exit(1)
print("secrets hidden")
