# argv: hidden... -- readable...
# Each hidden path is refused (EACCES, as a file and through everything
# below it when a directory); each readable one reads.  Names stay listable.
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
for p in hidden:   # the directory holding a secret stays listable
    if os.path.basename(p) not in os.listdir(os.path.dirname(p) or "."):
        bad.append("not listed: " + p)
if bad:
    print("WRONG:", bad); sys.exit(1)
print("secrets hidden, the rest readable")
