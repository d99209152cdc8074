# An x32 syscall number must kill the process (SIGSYS), not run.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall(0x40000000 + 39)   # x32 getpid
print("x32 syscall survived")
