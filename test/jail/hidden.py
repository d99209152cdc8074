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
for p in hidden:
    try:
        read_all(p)
        bad.append("readable: " + p)
    except OSError as e:
        if e.errno != errno.EACCES: bad.append("%s: errno %d" % (p, e.errno))
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
