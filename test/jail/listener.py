# Host-side listener (runs outside the jail): TCP, UDP, a unix pathname and an
# abstract unix socket; appends what it heard to argv[1].  Prints the ports.
import os, socket, sys, select
log, upath, abstract = sys.argv[1:4]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", 0)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
p = socket.socket(socket.AF_UNIX); p.bind(upath); p.listen(8); os.chmod(upath, 0o777)
a = socket.socket(socket.AF_UNIX); a.bind("\0" + abstract); a.listen(8)
print(t.getsockname()[1], u.getsockname()[1], flush=True)
names = {t: "tcp", u: "udp", p: "unix-path", a: "unix-abstract"}
while True:
    for s in select.select(list(names), [], [])[0]:
        if s is u: s.recvfrom(100)
        else: s.accept()[0].close()
        with open(log, "a") as f: f.write("HEARD " + names[s] + "\n")
