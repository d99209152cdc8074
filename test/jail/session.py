# A session (nested Landlock domain, not dumpable) still reads its own /proc.
# Inside a container (argument "container") the namespace mode may have no
# /proc at all: the runtime masks parts of its own, and the kernel then
# refuses a new proc in a user namespace; nothing of the host's is there.
import os, sys
if os.path.exists("/proc/self/status") or "container" not in sys.argv[1:]:
    print(len(os.listdir("/proc/self/fd")), open("/proc/self/status").read().count("\n") > 10)
else:
    assert os.listdir("/proc") == [], os.listdir("/proc")
    print("no /proc (container)")
try:
    os.kill(os.getppid(), 0); print("ESCAPED: signalled the zygote"); sys.exit(1)
except PermissionError:
    pass
print("session ok")
