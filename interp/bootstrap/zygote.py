# _psm: the notebook side of a session, embedded in the binary.
#
# Written in seven parts, one concern each, joined in this order into one
# module by interp/bootstrap_py.S (one text, compiled once): this one (the
# imports, the shared state, the zygote's start), warmup.py, session.py,
# cells.py, refusals.py, figures.py, saved.py.  A part uses the names of
# the others as one module does; nothing is read from disk at run time.
#
# The zygote imports this module once (zygote_init), then every session forked
# from it calls session_init and, per call, handle(message).  It runs inside
# the jail: nothing here is trusted by the server, which checks every file and
# bounds every field it receives.  Python's audit hooks are used only to name
# the permission behind a refusal; the kernel does the enforcing.
import ast
import builtins
import errno
import json
import linecache
import mmap
import os
import sys
import time
import traceback
import types

from _psm_native import self_view as _native_self_view

_cfg = {}
_session = {"name": "default", "ns": None, "figures": 0}
_events = []  # recent (time, permission, detail) from the audit hook


def _log(msg):
    try:
        os.write(2, ("[psm] %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


# ---------------------------------------------------------------- zygote


def _memfd_refused(name, flags=0):
    """os.memfd_create where the sandbox refuses memfds (the kernel says
    EPERM): the same error, saying why and what to use instead."""
    raise PermissionError(
        errno.EPERM,
        "memfd_create is refused in this sandbox: memory_mb could not count a memfd once "
        "its descriptor is sent over a socket and closed; use a file under /tmp or "
        "/dev/shm, or mmap.mmap(-1, size)")


def _patch_own_pid():
    """The kernel lets a cell change the affinity and priority of itself
    only: pid 0 (jail/seccomp.c).  os.getpid() means the same process,
    so it is passed as 0; another pid gets an error that says why."""
    import functools

    def own(fn, pos, name):
        @functools.wraps(fn)
        def inner(*args):
            args = list(args)
            if len(args) > pos and args[pos] == os.getpid():
                args[pos] = 0
            try:
                return fn(*args)
            except PermissionError as e:
                if len(args) > pos and args[pos] != 0:
                    raise PermissionError(
                        errno.EPERM, "%s of another process is refused in this sandbox: "
                        "a cell may change only its own process's (pid 0 or os.getpid())" % name) from e
                raise
        return inner

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity = own(os.sched_setaffinity, 0, "sched_setaffinity")
    if hasattr(os, "setpriority"):
        os.setpriority = own(os.setpriority, 1, "setpriority")


# ---------------------------------------------------------------- joblib

# joblib's default backend, loky, starts each worker by running a new
# Python (fork, then exec), which shell_exec: false refuses: the forked
# child, its exec refused, went on running the cell after closing the
# session's descriptors, and the cell drowned in "Bad file descriptor".
# Measured with cross_val_score of a RandomForest on 2 cores: threads
# 0.81 s against 0.93 s sequential (digits), and no process, no exec, no
# copy of the session's memory; joblib's "multiprocessing" backend needs
# loky's resource tracker (an exec too).  So under shell_exec: false
# threads are joblib's default, set once joblib.parallel is first imported (nothing is imported
# for a cell that never uses joblib), and loky, asked for by name, is
# refused before it forks, with the way out.
_LOKY_DENIED = "joblib-loky"


def _joblib_threads(mod):
    if _cfg.get("shell_exec"):
        return  # loky can start its workers: joblib as it comes
    if getattr(mod, "DEFAULT_BACKEND", None) == "loky" and "threading" in getattr(mod, "BACKENDS", {}):
        mod.DEFAULT_BACKEND = "threading"


def _loky_refused(mod):
    fork_exec = getattr(mod, "fork_exec", None)
    if fork_exec is None or _cfg.get("shell_exec"):
        return

    def refused(cmd, keep_fds, env=None):
        _events.append(("shell_exec", _LOKY_DENIED, "os.exec"))
        raise PermissionError(errno.EPERM, "joblib starts a new program here (the workers of its loky "
                              "backend, the resource tracker of its multiprocessing backend), which the "
                              "sandbox refuses (shell_exec: false)")

    mod.fork_exec = refused


_IMPORT_PATCHES = {"joblib.parallel": _joblib_threads,
                   "joblib.externals.loky.backend.fork_exec": _loky_refused}


class _PatchingLoader:
    """The module's own loader; the patch runs once the module is loaded."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception as e:
            _log("%s: %s" % (module.__name__, e))


class _ImportPatches:
    """First on sys.meta_path: one dict lookup per module not loaded yet."""

    def find_spec(self, name, path=None, target=None):
        patch = _IMPORT_PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def _install_import_patches():
    for name, patch in _IMPORT_PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _ImportPatches())


def zygote_init(cfg_json):
    """Imports the scientific stack once, so every session is a fork away."""
    global _cfg
    _cfg = json.loads(cfg_json)
    t0 = time.monotonic()
    # The venv's site-packages are not added here: whatever a .pth file
    # runs would run in the zygote, the parent of every later session (its
    # messages to the server, and what survives reset: true).  Each session
    # adds them after its fork (_add_venv).
    missing = []
    for mod in ("numpy", "pandas", "matplotlib"):
        try:
            __import__(mod)
        except Exception as e:  # a missing package must not stop the server
            missing.append("%s (%s)" % (mod, e))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401 (warm: fonts, backends)

        _patch_matplotlib()
    except Exception as e:
        missing.append("matplotlib.pyplot (%s)" % e)
    try:
        import PIL.Image  # noqa: F401 (used to downscale images)
    except Exception:
        pass
    _pandas_display()
    if _cfg.get("nsfree"):
        _patch_metadata()
        _patch_semlock()
    else:
        _patch_shutil()
    if _cfg.get("no_memfd") and hasattr(os, "memfd_create"):
        os.memfd_create = _memfd_refused
    _patch_own_pid()
    _install_import_patches()
    _warm_setup()
    sys.addaudithook(_audit)
    return json.dumps(
        {
            "python": sys.version.split()[0],
            "warm_ms": round((time.monotonic() - t0) * 1000, 1),
            "missing": missing,
        }
    )


def _pandas_display():
    """pandas sizes its reprs for an 80-column terminal (describe() of 16
    columns showed 4); a reply has room for more: the width and the number
    of columns follow the output limit (200 and 20 at 8,000 characters:
    statsmodels' macrodata, 14 columns, shows all 60 rows pandas shows in
    7,563 characters; a value longer than the limit, _frame_repr)."""
    pd = sys.modules.get("pandas")
    if pd is None:
        return
    chars = int(_cfg.get("max_result_chars", 8000) or 8000)
    try:
        pd.set_option("display.width", max(80, min(chars // 40, 250)))
        pd.set_option("display.max_columns", max(10, min(chars // 400, 100)))
    except Exception as e:
        _log("pandas display options: %s" % e)


# The names a notebook of the data stack has bound (numpy as np ...): the
# modules are in the zygote already, so binding them costs nothing.
_BOUND = (("np", "numpy"), ("pd", "pandas"), ("plt", "matplotlib.pyplot"))


def _patch_shutil():
    """shutil.copy, copy2, copymode, copystat and copytree copy the source's
    mode, and the kernel refuses modes with setuid, setgid or sticky bits or
    group or other write in the sandbox: a project file of mode 664 (a umask
    of 002) would make shutil.copy fail after copying.  Inside those calls
    only, such bits are left out, as tarfile's "data" filter does.  A chmod
    the code asks for itself is untouched (and refused)."""
    import functools
    import shutil
    import threading

    state = threading.local()
    real_chmod = os.chmod

    @functools.wraps(real_chmod)
    def chmod(path, mode, *args, **kwargs):
        if getattr(state, "copying", 0):
            mode &= ~0o7022
        return real_chmod(path, mode, *args, **kwargs)

    def copying(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            state.copying = getattr(state, "copying", 0) + 1
            try:
                return fn(*args, **kwargs)
            finally:
                state.copying -= 1
        return inner

    for group in (os.supports_fd, os.supports_dir_fd, os.supports_follow_symlinks):
        if real_chmod in group:
            group.add(chmod)
    os.chmod = chmod
    shutil.copymode = copying(shutil.copymode)
    shutil.copystat = copying(shutil.copystat)
