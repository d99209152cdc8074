# argv: canary_path canary_value
import os, sys, glob
path, value = sys.argv[1], sys.argv[2][::-1]   # reversed: not in our own cmdline
# Without a pid namespace (mode nsfree) other processes' command lines and
# status stay readable in /proc (documented); their environment must not.
nsfree = len(sys.argv) > 3 and sys.argv[3] == "nsfree"
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
pids = [p for p in os.listdir("/proc") if p.isdigit()]
if nsfree:
    readable = []
    for p in pids:
        try:
            open("/proc/%s/environ" % p, "rb").read(1)
            if int(p) != os.getpid(): readable.append(p)
        except OSError:
            pass
    if readable: found.append("host environments readable: %s" % readable[:5])
    pids = []
if len(pids) > 10: found.append("host processes visible: %d" % len(pids))
for p in pids:
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read()
        if b"bash" in cmd or b"run.sh" in cmd: found.append("host process " + p)
    except OSError:
        pass
try:
    if "root:" in open("/etc/passwd").read(): found.append("host /etc/passwd")
except OSError:
    pass
if found:
    print("LEAKED:", found); sys.exit(1)
print("secrets hidden")
