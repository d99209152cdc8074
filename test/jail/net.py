# argv: tcp_port udp_port unix_path abstract_name
import os, sys, socket, ctypes, urllib.request
tcp, udp, upath, abstract = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
bad = []
def attempt(name, fn):
    try:
        fn()
    except OSError:
        return
    except Exception as e:
        if "URLError" in type(e).__name__: return
        raise
    bad.append(name)
def tcp_connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(2); s.connect(("127.0.0.1", tcp))
def udp_send():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", udp))
attempt("tcp", tcp_connect)
attempt("udp", udp_send)
attempt("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
attempt("urllib", lambda: urllib.request.urlopen("http://127.0.0.1:%d/" % tcp, timeout=2))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
def unix_path():
    s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(upath)
attempt("unix-path", unix_path)
def unix_abstract():
    s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("\0" + abstract)
attempt("unix-abstract", unix_abstract)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(41, 2, 3, 6) >= 0: bad.append("raw socket syscall")                # socket(AF_INET, SOCK_RAW, TCP)
if libc.syscall(41, 2 | (1 << 32), 1, 0) >= 0: bad.append("socket high bits")
params = ctypes.create_string_buffer(120)
if libc.syscall(425, 8, params) >= 0: bad.append("io_uring_setup")
a, b = socket.socketpair(); a.send(b"ok"); assert b.recv(2) == b"ok"         # socketpair stays
if bad:
    print("ESCAPED:", bad); sys.exit(1)
print("network refused")
