# argv: hidden... -- readable...
# Each hidden path is refused (EACCES, as a file and through everything
# below it when a directory); each readable one reads.
import errno, os, sys
k = sys.argv.index("--")
hidden, readable = sys.argv[1:k], sys.argv[k + 1:]
bad = []
def read_all(p):
    if os.path.isdir(p):
        for d, _, files in os.walk(p):
            for f in files:
                open(os.path.join(d, f)).read()
    else:
        open(p).read()
def reopened(p):
    # An O_PATH descriptor reopened through /proc: checked as an open.
    fd = os.open(p, os.O_PATH)
    try:
        open("/proc/self/fd/%d" % fd).read()
    finally:
        os.close(fd)
# No /proc at all in the jail (the namespace mode inside a container whose
# runtime masks parts of its /proc: the kernel refuses a new one; kernel.py
# and session.py hold that to containers): the two routes through /proc do
# not exist, and say so with ENOENT.
try:
    no_proc = os.path.isdir("/proc") and not os.listdir("/proc")
except OSError:  # the namespace-free mode: /proc is there, its list refused
    no_proc = False
for p in hidden:
    # By its path, through /proc/self/root, and reopened from O_PATH.
    for how, fn in (("", read_all), ("/proc/self/root ", lambda q: read_all("/proc/self/root" + os.path.abspath(q))),
                    ("reopened ", reopened)):
        try:
            fn(p)
            bad.append("readable %s: %s" % (how, p))
        except OSError as e:
            if e.errno == errno.ENOENT and how and no_proc: continue
            if e.errno != errno.EACCES: bad.append("%s%s: errno %d" % (how, p, e.errno))
for p in readable:
    try: read_all(p)
    except OSError as e: bad.append("refused: %s (%s)" % (p, e))
# A secret's name stays listable where it lies (what a secret directory
# holds may not be: the mount tree covers it with an empty directory).
for p in hidden:
    parts = p.split("/")
    for i in range(len(parts) - 1, -1, -1):
        try:
            names = os.listdir("/".join(parts[:i]) or ".")
        except OSError:
            continue
        if parts[i] not in names: bad.append("not listed: " + p)
        break
if bad:
    print("WRONG:", bad); sys.exit(1)
print("secrets hidden, the rest readable")
