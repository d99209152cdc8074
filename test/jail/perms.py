# argv: what expect(yes|no) args... ; checks one permission in one direction.
import os, sys, socket, subprocess
what, expect = sys.argv[1], sys.argv[2] == "yes"
args = [os.path.expandvars(a) for a in sys.argv[3:]]  # '$TMPDIR/x': the jail's scratch
def can(fn):
    try:
        fn(); return True
    except OSError:
        return False
def write(p):
    with open(p, "w") as f: f.write("x")
if what == "read":
    got = can(lambda: open(args[0]).read())
elif what == "write":
    got = can(lambda: write(args[0]))
elif what == "exec":
    got = can(lambda: subprocess.run(["/usr/bin/true"], check=True))
elif what == "exec-jailed":   # programs run, still inside: no secret, same uid
    r = subprocess.run(["/bin/sh", "-c", "cat %s; id -u" % args[0]], capture_output=True, text=True)
    got = r.stdout.strip() == str(os.geteuid()) and "CANARY" not in r.stdout
elif what == "net":
    def conn():
        s = socket.socket(); s.settimeout(3); s.connect(("127.0.0.1", int(args[0]))); s.close()
    got = can(conn)
else:
    sys.exit(2)
print(what, "allowed" if got else "refused")
sys.exit(0 if got == expect else 1)
