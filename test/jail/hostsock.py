# Host side (outside the jail): listens on unix pathname sockets, a stream
# one at P.s and a datagram one at P.d for each prefix P given, and an
# abstract one per prefix; appends what it heard to argv[1].  Prints "ready".
import os, socket, sys, select
log = sys.argv[1]
names = {}
for pre in sys.argv[2:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(pre + ".s"); s.listen(8)
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind(pre + ".d")
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a.bind("\0" + os.path.basename(pre))
    for x, path in ((s, pre + ".s"), (d, pre + ".d")):
        os.chmod(path, 0o777)
    names.update({s: pre + ".s", d: pre + ".d", a: "abstract " + os.path.basename(pre)})
print("ready", flush=True)
while True:
    for s in select.select(list(names), [], [])[0]:
        if s.type == socket.SOCK_STREAM: s.accept()[0].close()
        else: s.recv(100)
        with open(log, "a") as f: f.write("HEARD " + names[s] + "\n")
