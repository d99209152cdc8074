
# ---------------------------------------------------------------- multiprocessing without /dev/shm

# multiprocessing's locks, semaphores, events, queues and Pool are built on
# POSIX named semaphores (sem_open), which glibc keeps as files in
# /dev/shm.  Without namespaces that is the host's /dev/shm, shared with
# every user and under no limit of the session's: the jail grants nothing
# there, and Pool(2) failed with a PermissionError that named a secret
# file.  So in that mode each semaphore is unnamed (sem_init, shared
# between processes) in an anonymous shared page that forked children
# inherit: no file, no name another process could open, and the page is
# the session's shared memory, counted like any other.  The semantics are
# those of CPython's _multiprocessing.SemLock (Modules/_multiprocessing/
# semaphore.c), for the fork start method, the one the sandbox has without
# exec; a semaphore passed to a spawned process (which would open it by
# name) gets an error that says so.

_SEM_BYTES = 64  # sizeof(sem_t) is 32 on x86-64 and arm64
_RECURSIVE_MUTEX, _SEMAPHORE = 0, 1
_sem_libc = None


def _sem_calls():
    global _sem_libc
    if _sem_libc is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for name, args in (("sem_init", (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint)),
                           ("sem_post", (ctypes.c_void_p,)), ("sem_trywait", (ctypes.c_void_p,)),
                           ("sem_wait", (ctypes.c_void_p,)), ("sem_getvalue", (ctypes.c_void_p, ctypes.c_void_p)),
                           ("sem_clockwait", (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p))):
            fn = getattr(libc, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _sem_libc = (ctypes, libc)
    return _sem_libc


def _sem_raise(e):
    raise OSError(e, os.strerror(e))


class _SharedSemLock:
    """_multiprocessing.SemLock on an unnamed process-shared semaphore."""

    SEM_VALUE_MAX = 2147483647

    def __init__(self, kind, value, maxvalue, name, unlink):
        if not unlink:
            # Not an OSError: no policy refused it (denied_by stays empty).
            raise RuntimeError(
                "multiprocessing's spawn and forkserver start methods open their semaphores by name "
                "in /dev/shm, which this sandbox does not have without namespaces: use the default "
                "start method, fork")
        if kind not in (_RECURSIVE_MUTEX, _SEMAPHORE):
            raise ValueError("unrecognized kind")
        ctypes, libc = _sem_calls()
        self._page = mmap.mmap(-1, _SEM_BYTES)  # MAP_SHARED | MAP_ANONYMOUS
        self._cell = ctypes.c_char.from_buffer(self._page)
        self.handle = ctypes.addressof(self._cell)
        if libc.sem_init(self.handle, 1, value) < 0:
            _sem_raise(ctypes.get_errno())
        self.kind, self.maxvalue, self.name = kind, maxvalue, None
        self._n, self._tid = 0, 0

    @classmethod
    def _rebuild(cls, *state):
        raise RuntimeError("a multiprocessing semaphore cannot be passed to a process started by "
                           "spawn or forkserver in this sandbox (no /dev/shm without namespaces): "
                           "use the default start method, fork")

    def _mine(self):
        return self._n > 0 and self._tid == _mp_thread()

    def acquire(self, block=True, timeout=None):
        if self.kind == _RECURSIVE_MUTEX and self._mine():
            self._n += 1
            return True
        ctypes, libc = _sem_calls()
        if libc.sem_trywait(self.handle) < 0:
            if not block:
                return False
            deadline = None
            if timeout is not None:
                deadline = time.monotonic() + max(float(timeout), 0.0)
            while True:
                if deadline is None:
                    r = libc.sem_wait(self.handle)
                else:
                    ts = (ctypes.c_long * 2)(int(deadline), int((deadline % 1) * 1e9))
                    r = libc.sem_clockwait(self.handle, time.CLOCK_MONOTONIC, ts)
                if r == 0:
                    break
                e = ctypes.get_errno()
                if e == errno.ETIMEDOUT:
                    return False
                if e != errno.EINTR:
                    _sem_raise(e)
                # A signal: its Python handler runs before the next wait
                # (KeyboardInterrupt, the call's cancel), then it goes on.
        self._n += 1
        self._tid = _mp_thread()
        return True

    def release(self):
        ctypes, libc = _sem_calls()
        if self.kind == _RECURSIVE_MUTEX:
            if not self._mine():
                raise AssertionError("attempt to release recursive lock not owned by thread")
            if self._n > 1:
                self._n -= 1
                return
        elif self.maxvalue == 1:
            if libc.sem_trywait(self.handle) == 0:
                libc.sem_post(self.handle)
                raise ValueError("semaphore or lock released too many times")
        elif self._get_value() >= self.maxvalue:
            raise ValueError("semaphore or lock released too many times")
        if libc.sem_post(self.handle) < 0:
            _sem_raise(ctypes.get_errno())
        self._n -= 1

    __enter__ = acquire

    def __exit__(self, *args):
        return self.release()

    def _count(self):
        return self._n

    def _is_mine(self):
        return self._mine()

    def _get_value(self):
        ctypes, libc = _sem_calls()
        v = ctypes.c_int(0)
        libc.sem_getvalue(self.handle, ctypes.byref(v))
        return v.value

    def _is_zero(self):
        return self._get_value() == 0

    def _after_fork(self):
        self._n = 0


def _mp_thread():
    import threading

    return threading.get_ident()


def _patch_semlock():
    """Without namespaces: multiprocessing's semaphores without /dev/shm
    (synchronize.py looks the class up at each use)."""
    try:
        import _multiprocessing
    except ImportError:
        return
    _multiprocessing.SemLock = _SharedSemLock
