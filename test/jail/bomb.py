# argv: kind (fork|thread).  Must hit the process limit well below 200.
import os, sys, threading, time
kind = sys.argv[1]
n = 0
kids = []
try:
    for _ in range(200):
        if kind == "fork":
            pid = os.fork()
            if pid == 0:
                time.sleep(5); os._exit(0)
            kids.append(pid)
        else:
            t = threading.Thread(target=time.sleep, args=(3,), daemon=True); t.start()
        n += 1
except (BlockingIOError, RuntimeError, OSError) as e:
    print("stopped at", n, type(e).__name__)
for pid in kids:
    os.kill(pid, 9); os.waitpid(pid, 0)
fds = []
try:
    while len(fds) < 100000: fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print("fds", len(fds))
sys.exit(0 if n < 200 and len(fds) < 2000 else 1)
