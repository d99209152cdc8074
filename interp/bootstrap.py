# _psm: the notebook side of a session, embedded in the binary.
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
        "memfd_create is refused in this sandbox: the server cannot count memfds toward "
        "memory_mb here (it runs without privilege over its sessions' processes); use a "
        "file under /tmp, or mmap.mmap(-1, size)")


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


# ---------------------------------------------------------------- warm-up
#
# Learned warm-up (docs/WARMUP.md).  Each session reports, with each result,
# the modules its cell imported that the zygote did not hold (_imports_of).
# The server checks those names, keeps a bounded list per project in the
# user's state directory, and after a reply sends the zygote the names it has
# not loaded yet.  The zygote first imports each one in a throw-away fork
# (warm_probe), then in itself, one module per step between requests
# (warm_begin, warm_step), so every later session is forked with it loaded.
#
# The session is hostile and the zygote is the parent of every later
# session: whatever runs in the zygote is there for them all.  So a reported
# name is only ever a name; the code it stands for must be part of the
# installed Python, found through the zygote's own path (never a session's),
# and every file that the import loaded must lie there too.

_NAME_RE = None
_NAME_MAX = 128
# Imports that do something else than define a module: print (this), open a
# browser (antigravity), start a GUI or a test run, run at interpreter
# start-up (site hooks), or are the entry points of the interpreter's
# command line (python -m NAME), whose import is no use to a session and
# whose code is made to act on the working directory and sys.argv.  Never
# worth holding in the zygote, whatever the session says.  Any name with a
# __main__ part is refused too: importing one runs its program (attack:
# unittest.__main__ ran a test discovery that imported the workspace as a
# package, and with it a planted __init__.py).  The server refuses the
# same names before it sends any (supervisor/warmup.c); each side checks
# on its own.
_WARM_DENY = frozenset((
    "__main__", "_psm", "this", "antigravity", "__hello__", "__phello__",
    "idlelib", "tkinter", "turtle", "turtledemo", "test", "pip", "ensurepip",
    "venv", "site", "sitecustomize", "usercustomize", "pydoc", "pdb", "code",
    "readline", "rlcompleter", "timeit", "cProfile", "profile", "trace",
    "runpy", "doctest", "zipapp", "tabnanny", "py_compile", "compileall",
    "pickletools", "webbrowser", "lib2to3", "pytest", "_pytest", "IPython"))
_WARM_DENY_FULL = frozenset((
    "unittest.main", "http.server", "json.tool", "xmlrpc.server", "wsgiref.simple_server",
    "sqlite3.dump", "asyncio.__main__", "pydoc_data.topics"))
# The zygote follows at most this many modules of a probe's answer: a
# forged answer that lists every installed module gets no further.
_WARM_ORDER_MAX = 2000
_WARM_MAX_MS = 30000.0     # an import slower than this (CPU time, in the probe) is dropped
_WARM_MAX_GROWTH = 256 << 20  # ... and one that adds more memory than this
_warm = {"trusted": [], "writable": [], "base": frozenset(), "plan": [], "name": None,
         "t0": 0.0, "probe_ms": 0.0}


def _imports_of(tree):
    """The modules the cell imported itself (import a.b, from a.b import c
    when a.b.c is a module) that are loaded now and were not in the zygote
    at its start.  A report, never trusted: the server checks every name
    and the zygote every file."""
    try:
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
                names.extend("%s.%s" % (node.module, a.name) for a in node.names)
            if len(names) > 256:
                break
        base = _warm["base"]
        out = []
        for n in names:
            if n in sys.modules and n not in base and n not in out:
                out.append(n)
        # scipy.stats says scipy too: keep the longest names only.
        out = [n for n in out if not any(o.startswith(n + ".") for o in out)]
        return out[:_RESULT_IMPORTS]
    except Exception:
        return []


def _real(path):
    try:
        return os.path.realpath(path)
    except Exception:
        return None


def _under(path, roots):
    for r in roots:
        if path == r or path.startswith(r.rstrip("/") + "/"):
            return True
    return False


def _warm_setup():
    """Called at the end of zygote_init: what the zygote holds at start
    (never reported), and the installation's own directories: the
    entries of the zygote's sys.path that exist and lie outside everything
    the sandboxed code can write."""
    global _NAME_RE
    import re

    _NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}\Z")
    _warm["base"] = frozenset(sys.modules)
    # Attack: a writable directory that is also on the path (a venv listed
    # in fs_write, the workspace, the jail's /tmp) would let a session put a
    # module there for the zygote to import.  Such entries are not the
    # installation: they are left out, and any file under them refused.
    # The project itself is not the installation either: ROOT holds the
    # project's own files, whatever the mode says about writing there.
    writable = [w for w in (_real(p) for p in _cfg.get("writable", [])) if w]
    project = [w for w in (_real(p) for p in _cfg.get("project", [])) if w]
    trusted = []
    for p in sys.path:
        if not p or not os.path.isabs(p):
            continue  # "" or a relative entry: the cwd, which is ROOT
        rp = _real(p)
        if rp and os.path.isdir(rp) and not _under(rp, writable + project) and rp not in trusted:
            trusted.append(rp)
    _warm["trusted"] = trusted
    _warm["writable"] = writable + project
    sys.addaudithook(_warm_audit)


def _warm_name_refused(name):
    if not isinstance(name, str) or len(name) > _NAME_MAX or not _NAME_RE.match(name):
        return "not a module name"
    parts = name.split(".")
    if "__main__" in parts:
        return "a __main__ module runs a program when imported"
    if parts[0] in _WARM_DENY or any(".".join(parts[:i]) in _WARM_DENY_FULL for i in range(2, len(parts) + 1)):
        return "not a module to hold in the zygote"
    return None


def _file_refused(path):
    """None when path is a file of the installed Python, else why not.
    realpath: a symlink inside dist-packages that points into the
    workspace is judged by where it leads."""
    rp = _real(path)
    if not rp:
        return "its file %s cannot be resolved" % path
    if _under(rp, _warm["writable"]):
        return "its file %s lies where sandboxed code can write" % rp
    if not _under(rp, _warm["trusted"]):
        return "its file %s is not part of the installed Python" % rp
    return None


def _warm_audit(event, args):
    """While the zygote imports for the warm-up (and in the probe): notes
    code that comes from outside the installation, whatever it does
    afterwards to sys.modules: a module imported from a file there, code
    compiled from or executed with such a file name, a library loaded from
    there.  A tripwire for what the layers before it (the name checks, an
    empty working directory, the installation's path) let through: code
    that knows it is watched can undo anything in its own process, which
    is why those layers come first."""
    if event == "import" and _cell_looked is not None and len(_cell_looked) <= _CELL_LOOKED_MAX:
        _cell_looked.append(args[0] if args else None)
    if not _warm_watch:
        return
    path = None
    if event == "import" and len(args) > 1:
        path = args[1]
    elif event == "compile" and len(args) > 1:
        path = args[1]
    elif event == "exec" and args:
        path = getattr(args[0], "co_filename", None)
    elif event == "ctypes.dlopen" and args:
        path = args[0]
    try:
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        if not isinstance(path, str) or not path.startswith("/"):
            return  # "<string>", "<frozen ...>", a bare library name: not a file
        why = _file_refused(path)
        if why and len(_warm_watch) < 8:
            _warm_watch.append("%s: %s" % (event, why))
    except Exception:  # an audit hook must never fail the operation
        if len(_warm_watch) < 8:
            _warm_watch.append("%s: a file that cannot be judged" % event)


# Non-empty while the zygote (or its probe) imports for the warm-up: the
# first entry is a marker, the others what _warm_audit saw.
_warm_watch = []

# While a cell runs: the names it looked for that were not loaded yet (the
# "import" audit event is raised only for those: each is a search of the
# path, a read of files).  _import_read judges them after the cell.
_cell_looked = None
_CELL_LOOKED_MAX = 4096


def _import_read(looked):
    """Whether an import of the cell read beyond the installed Python: a
    module now loaded from a file outside it (the project's, the
    workspace's, a path the cell added), a name not found (a file added
    later would be found by a second run), or more searches than are
    judged.  The server then takes a checkpoint rather than log the cell
    for replay (supervisor/replay.c): run again, such an import could read
    other bytes.  The session's word, about its own rollback only."""
    try:
        if len(looked) > _CELL_LOOKED_MAX:
            return True
        for name in set(looked):
            m = sys.modules.get(name) if isinstance(name, str) else None
            if m is None:
                return True
            f = getattr(m, "__file__", None)
            files = [f] if f else list(getattr(m, "__path__", None) or ())
            if any(not isinstance(x, str) or _file_refused(x) for x in files):
                return True
        return False
    except Exception:
        return True


def _spec_refused(spec, name):
    if spec is None:
        return "%s is not installed (not found on the interpreter's own path)" % name
    if spec.origin in ("built-in", "frozen"):
        return None
    paths = []
    if spec.has_location and spec.origin:
        paths.append(spec.origin)
    paths.extend(list(spec.submodule_search_locations or []))
    # No file at all: a module that a finder or loader of the installation
    # makes itself (setuptools' distutils alias, six.moves).  A session
    # cannot add finders to the zygote: its own are in its own process.
    for p in paths:
        why = _file_refused(p)
        if why:
            return "%s: %s" % (name, why)
    return None


def _module_refused(name, mod):
    spec = getattr(mod, "__spec__", None)
    why = _spec_refused(spec, name) if spec is not None else None
    f = getattr(mod, "__file__", None)
    if why is None and isinstance(f, str):
        why = _file_refused(f)
        why = "%s: %s" % (name, why) if why else None
    return why  # no file of its own: made by installed code at run time


def _resolve_checked(name):
    """Finds name, each package on its way first, on the installation's
    path only, and refuses it when any part comes from elsewhere.  Finding
    a.b imports the package a (whose own file was checked the step
    before); nothing of a is run before that check."""
    import importlib.util

    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sub = ".".join(parts[:i])
        mod = sys.modules.get(sub)
        if mod is not None:
            why = _module_refused(sub, mod)
        else:
            try:
                spec = importlib.util.find_spec(sub)
            except Exception as e:
                return "%s: %s" % (sub, _reason(e))
            why = _spec_refused(spec, sub)
        if why:
            return why
    return None


class _TrustedPath:
    """sys.path restricted to the installation while the zygote (or its
    probe) imports.  The zygote's own path holds nothing else already; this
    keeps it so should an import itself add an entry."""

    def __enter__(self):
        self.saved = sys.path[:]
        sys.path[:] = _warm["trusted"]
        return self

    def __exit__(self, *exc):
        sys.path[:] = self.saved
        return False


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        return 0


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def warm_check(name):
    """In the zygote, before any fork: refuses at once a name that is
    malformed, denied, already held, or not found on the installation's
    path (finding a top-level name runs nothing).  "" when a probe should
    try it, else the JSON answer."""
    why = _warm_name_refused(name)
    if why is None and name in sys.modules:
        return json.dumps({"ok": True, "ms": 0, "held": True})
    if why is None:
        import importlib.util

        top = name.split(".", 1)[0]
        if top not in sys.modules:
            with _TrustedPath():
                try:
                    why = _spec_refused(importlib.util.find_spec(top), top)
                except Exception as e:
                    why = "%s: %s" % (top, _reason(e))
    return "" if why is None else json.dumps({"ok": False, "why": why})


def warm_probe(name):
    """In a throw-away fork of the zygote: imports name and judges what
    that did.  Refused when any module it loaded has a file outside the
    installation (an import that adds a path of its own), when it started
    a thread (a thread in the zygote makes every later fork unsafe), or
    when it took too long or too much memory.  The answer lists the
    modules it loaded, in the order their imports completed, for the
    zygote to load one by one."""
    import importlib
    import importlib._bootstrap as boot

    why = _warm_name_refused(name)
    if why:
        return json.dumps({"ok": False, "why": why})
    before = set(sys.modules)
    done = []
    real_find_and_load = boot._find_and_load

    def find_and_load(n, import_):
        mod = real_find_and_load(n, import_)
        if n not in before and n not in done:
            done.append(n)
        return mod

    # Only in this fork, which exits after the answer: records the order
    # in which imports complete (dependencies first).
    boot._find_and_load = find_and_load
    # CPU time, not the clock: the zygote stops its probe (SIGSTOP) while
    # a call runs, and a probe stopped for a long call is not slow.
    rss0, t0 = _rss(), time.process_time()
    _warm_watch[:] = ["probe"]
    try:
        with _TrustedPath():
            why = _resolve_checked(name)
            if why is None:
                importlib.import_module(name)
    except BaseException as e:
        why = "importing %s failed: %s" % (name, _reason(e))
    finally:
        boot._find_and_load = real_find_and_load
    seen = _warm_watch[1:]
    _warm_watch[:] = []
    if seen:
        why = "it ran code from outside the installation (%s)" % seen[0]
    ms = (time.process_time() - t0) * 1000
    if why is None:
        for n in list(sys.modules):
            if n not in before:
                why = _module_refused(n, sys.modules[n])
                if why:
                    why = "it loads %s" % why
                    break
    if why is None and _threads() > 1:
        why = "importing it starts a thread"
    if why is None and ms > _WARM_MAX_MS:
        why = "importing it took %.0f ms (more than %.0f)" % (ms, _WARM_MAX_MS)
    if why is None and _rss() - rss0 > _WARM_MAX_GROWTH:
        why = "importing it added %d MB (more than %d)" % ((_rss() - rss0) >> 20, _WARM_MAX_GROWTH >> 20)
    if why:
        return json.dumps({"ok": False, "why": why, "ms": round(ms, 1)})
    order = [n for n in done if n in sys.modules]
    order += [n for n in sys.modules if n not in before and n not in order]
    return json.dumps({"ok": True, "ms": round(ms, 1), "order": order[:20000]})


def warm_begin(arg_json):
    """The probe said yes: plan the zygote's own import of name, one
    module per warm_step.  Each step takes the first module, in the order
    the probe saw them complete, whose package is already loaded, so that
    a step loads little besides that module (a package's own __init__ and
    what it imports of its own subpackages cannot be split: scipy.optimize
    is one step); the name itself comes last."""
    arg = json.loads(arg_json)
    name = arg["name"]
    # The probe's answer is data from a process that ran the import: each
    # entry is only a name, checked as a session's report is, and each is
    # checked again (files, then everything loaded) when the zygote
    # imports it.  A probe that wrote its own answer gains no more than a
    # session's report would: installed modules, loaded under the checks.
    order = arg.get("order", [])
    order = order[:_WARM_ORDER_MAX] if isinstance(order, list) else []
    plan = [n for n in order if isinstance(n, str) and _warm_name_refused(n) is None]
    _warm["plan"] = plan + [name]
    _warm["rss0"] = _rss()
    _warm["tainted"] = []
    _warm["name"] = name
    _warm["t0"] = time.monotonic()
    _warm["steps"] = 0
    _warm["longest"] = 0.0
    return ""


def warm_step(_arg):
    """One module of the plan.  Each is checked as the probe checked it
    (it came from a fork of this very process, but the check is cheap).
    Returns "" while more remain, then the JSON outcome for the server."""
    import importlib

    plan = _warm["plan"]
    name = _warm["name"]
    if plan:
        pick = 0
        for i, n in enumerate(plan):
            parent = n.rpartition(".")[0]
            if not parent or parent in sys.modules:
                pick = i
                break
        n = plan.pop(pick)
        if n not in sys.modules:
            t0 = time.monotonic()
            _warm_watch[:] = ["zygote"]
            try:
                with _TrustedPath():
                    if _resolve_checked(n) is None:
                        importlib.import_module(n)
            except BaseException:
                pass  # the name's own import, last, says whether it worked
            finally:
                _warm["tainted"] += _warm_watch[1:]
                _warm_watch[:] = []
            _warm["steps"] += 1
            _warm["longest"] = max(_warm["longest"], (time.monotonic() - t0) * 1000)
        if plan:
            return ""
    _warm["plan"] = []
    ms = (time.monotonic() - _warm["t0"]) * 1000
    # Whether the name loaded or not, the zygote is judged on what it holds
    # and what its imports ran: a file outside the installation among its
    # modules, code from there seen running, a thread, memory past the
    # probe's bound.  Any of them and the zygote ends itself; the server
    # starts a new one (attack: an import that failed after it had run
    # planted code, which then patched builtins for every later session,
    # was only logged "not loaded" and the zygote kept).
    why = None
    if _warm["tainted"]:
        why = "it ran code from outside the installation (%s)" % _warm["tainted"][0]
    for n, m in list(sys.modules.items()):
        if why is None and n not in _warm["base"]:
            why = _module_refused(n, m)
    if why is None and _threads() > 1:
        why = "importing it started a thread in the zygote"
    if why is None and _rss() - _warm["rss0"] > 2 * _WARM_MAX_GROWTH:
        why = "importing it added %d MB to the zygote" % ((_rss() - _warm["rss0"]) >> 20)
    if why is not None:
        return json.dumps({"ok": False, "why": why, "tainted": True})
    mod = sys.modules.get(name)
    if mod is None:
        why = "it was not loaded"
    import gc

    # What the import made stays shared copy-on-write with the sessions,
    # as the stack imported at start does.
    gc.freeze()
    return json.dumps({"ok": why is None, "why": why, "ms": round(ms, 1), "steps": _warm["steps"],
                       "longest_ms": round(_warm["longest"], 1)})


# ---------------------------------------------------------------- session


def _add_venv():
    """The venv's site-packages, in this session only: site.addsitedir runs
    its .pth files here, inside the session's jail, after the fork from the
    zygote.  A venv where the sandboxed code can write (the workspace) is
    only put on the path: a .pth a cell planted there would otherwise run in
    every later session, reset ones included."""
    dirs = _cfg.get("site_dirs", [])
    if not dirs:
        return
    if _cfg.get("venv_pth", True):
        import site

        for d in dirs:
            site.addsitedir(d)
    else:
        for d in dirs:
            if d not in sys.path:
                sys.path.append(d)


def session_init(init_json):
    init = json.loads(init_json)
    _session["name"] = init.get("name", "default")
    try:
        _session["root"] = os.getcwd()  # ROOT, before any code can chdir
    except OSError:
        pass
    _add_venv()
    seed = int(init.get("seed", 0))
    import random

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    for name, mod in _BOUND:
        if sys.modules.get(mod) is not None:
            main.__dict__[name] = sys.modules[mod]
    sys.modules["__main__"] = main
    _session["ns"] = main.__dict__
    # A crash (SIGSEGV in a C extension, abort) writes the Python stack of
    # the thread that crashed to stderr as the process dies; the server
    # moves that report into the reply's error.  The handler then lets the
    # signal end the process as before (the exit code stays 128 + signal).
    try:
        import faulthandler

        faulthandler.enable(file=sys.__stderr__, all_threads=False)
    except Exception:
        pass
    # Each line reaches the server as it is printed, so progress messages
    # carry the latest line.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except Exception:
            pass
    return "ok"


_saved_random = [None]


# The session's resident memory at the first checkpoint after its last full
# collection, or at its first checkpoint (see before_checkpoint); 0: measure
# at the next.
_gc_full_rss = [0]


def _resident():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def before_checkpoint(_arg):
    # random reseeds itself in a forked child (os.register_at_fork): keep
    # its state so that a rolled-back session continues the same sequence.
    import gc
    import random

    _saved_random[0] = random.getstate()
    # The collector and the checkpoint: after the fork every page of the
    # session is shared with the frozen copy, and a full collection writes
    # into every object it traverses (its gc_refs), so one that a later
    # cell happens to set off copies every page that holds an object, at
    # a fault each (measured: pd.json_normalize of 5,000 rows, 20 ms,
    # took 150 to 210 ms in a session of 190,000 objects whenever it set
    # off a full collection).  So the objects alive at a checkpoint are
    # frozen first, as the zygote's are: collections after it traverse
    # only what was made since.  What is young is collected before
    # (cheap: the old objects are not traversed), so that the last call's
    # garbage is not frozen.  A cycle of frozen objects that a later cell
    # drops waits for the next full collection: one whenever the session's
    # resident memory has doubled since the last, so that such garbage is
    # bounded by the session's own growth.  (gc.get_freeze_count() would
    # be the natural measure, but it walks the whole list: 8 ms at 110,000
    # objects, on every checkpoint.)
    try:
        rss = _resident()
        if not _gc_full_rss[0]:
            _gc_full_rss[0] = rss
        if rss > 2 * _gc_full_rss[0]:
            gc.unfreeze()
            gc.collect()
            # What it freed goes back to the system only in the
            # malloc_trim after this: the next checkpoint measures anew.
            _gc_full_rss[0] = 0
        else:
            gc.collect(1)
        gc.freeze()
    except Exception:
        pass
    return ""


def after_rollback(_arg):
    import random

    if _saved_random[0] is not None:
        random.setstate(_saved_random[0])
    return ""


def fork_init(arg_json):
    """In a copy of a session (fork_from), before its first cell: its own
    name (figures carry it), and the parent's random sequence."""
    _session["name"] = json.loads(arg_json).get("name", _session.get("name"))
    after_rollback("")
    return ""


def handle(msg_json):
    msg = json.loads(msg_json)
    kind = msg.get("op")
    if kind == "exec":
        cell = int(msg.get("cell", 1))
        restored = _restored.pop() if _restored else None
        if restored is not None:
            if not restored.get("verified") or _SNAPSHOT_FAILED in [f[0] for f in restored.get("failed", [])]:
                cell = 1  # nothing came back: a new session counts from 1
        out = _run_cell(msg["code"], cell)
        if restored is not None:
            out["restore"] = restored
        return _wire_result(out)
    if kind == "thumb":
        return _thumbnail(msg["path"], int(msg.get("max_bytes", 262144)))
    return _wire_result({"status": "error", "error": {"type": "ProtocolError", "message": "unknown op"}})


# ---------------------------------------------------------------- the result

# A cell's result (W_RESULT) as the server reads it.  proto/result.h is the
# one definition of its shape; these are its keys and bounds on this side,
# and _wire_result the one place that writes them (result_shape reports
# them, and test/unit/test_result.c checks that against the header).
# Every bound is the server's: a string or a list past it, and the server
# ends the session as one that broke its protocol, so a cell's own values
# (a class with a 10 kB name, a message holding a lone surrogate, which
# JSON cannot carry) are cut and made sendable here.
_RESULT_STATUS = ("ok", "error", "memory")
_RESULT_ERROR = (("type", 256), ("message", None), ("traceback", None),
                 ("denied_by", 32), ("hint", 4096), ("limit", 64))
_RESULT_IMPORTS, _RESULT_MODULE = 16, 128
_RESULT_LISTED, _RESULT_VAR, _RESULT_WHY = 32, 256, 512
_RESULT_RESTORE_LISTS = ("restored", "failed", "unsaved")


def _result_frame_max():
    """The largest result frame the server reads (result_frame_max in
    proto/result.h): 64 KiB and 12 bytes per character of the output
    limit, counted to at most 2**19 characters."""
    chars = int(_cfg.get("max_result_chars", 0) or 0)
    return 65536 + 12 * (chars if 0 < chars < (1 << 19) else 1 << 19)


def result_shape(_arg):
    """The keys and bounds above, for test/unit/test_result.c."""
    return json.dumps({"status": _RESULT_STATUS, "error": _RESULT_ERROR,
                       "imports": [_RESULT_IMPORTS, _RESULT_MODULE],
                       "listed": [_RESULT_LISTED, _RESULT_VAR, _RESULT_WHY],
                       "restore": _RESULT_RESTORE_LISTS, "frame_max": _result_frame_max()})


def _wire_text(s, limit=None):
    """s as the server takes it: a str, no NUL (a C string ends there), no
    lone surrogate (its escape instead), at most limit bytes of UTF-8."""
    if s is None:
        return None
    b = str(s).replace("\0", "\\x00").encode("utf-8", "backslashreplace")
    if limit is not None and len(b) > limit:
        b = b[:limit]
    return b.decode("utf-8", "ignore")


def _wire_list(items, pairs):
    """At most _RESULT_LISTED names (or [name, why] pairs), and how many
    more there were."""
    out = []
    for it in items[:_RESULT_LISTED]:
        name, why = (it[0], it[1]) if pairs and isinstance(it, (list, tuple)) and len(it) == 2 else (it, "")
        name = _wire_text(name, _RESULT_VAR) or "?"
        out.append([name, _wire_text(why, _RESULT_WHY)] if pairs else name)
    return out, max(0, len(items) - _RESULT_LISTED)


def _wire_body(out, cut):
    status = out.get("status")
    msg = {"status": status if status in _RESULT_STATUS else "error",
           "result": _wire_text(_cap(out["result"], cut) if cut and out.get("result") else out.get("result")),
           "error": None}
    err = out.get("error")
    if err:
        e = {}
        for key, limit in _RESULT_ERROR:
            v = err.get(key)
            e[key] = _wire_text(_cap(str(v), cut) if cut and v and limit is None else v, limit)
        e["type"] = e["type"] or "Exception"
        msg["error"] = e
    names = [n for n in out.get("imports") or () if isinstance(n, str)]
    names = [n for n in names if 0 < len(n.encode("utf-8", "backslashreplace")) <= _RESULT_MODULE]
    if names:
        msg["imports"] = [_wire_text(n) for n in names[:_RESULT_IMPORTS]]
    if out.get("import_read"):
        msg["import_read"] = True
    if out.get("effect"):
        msg["effect"] = _wire_text(out["effect"], 120)
    w = out.get("wchar")
    if isinstance(w, int) and w >= 0:
        msg["wchar"] = min(w, 1 << 53)
    r = out.get("restore")
    if isinstance(r, dict):
        rs = {"verified": bool(r.get("verified"))}
        for key in _RESULT_RESTORE_LISTS:
            items = r.get(key)
            rs[key], more = _wire_list(list(items) if isinstance(items, (list, tuple)) else [], key != "restored")
            if more:
                rs[key + "_more"] = more
        msg["restore"] = rs
    return json.dumps(msg)


def _wire_result(out):
    """The W_RESULT body of a cell's outcome.  The long texts (the value,
    the message, the traceback) are each capped by the output limit
    already; together they may still outgrow the frame (three of them, and
    JSON spends up to 12 bytes on a character): then each is cut to its
    head and tail, shorter each time, until the frame fits."""
    body = _wire_body(out, None)
    cut = max(int(_cfg.get("max_result_chars", 8000) or 8000), 1000)
    while len(body) > _result_frame_max() - 4096 and cut >= 64:
        body = _wire_body(out, cut)
        cut //= 2
    return body


# ---------------------------------------------------------------- cells


def _ends_with_semicolon(code):
    for line in reversed(code.splitlines()):
        s = line.split("#", 1)[0].rstrip()
        if s:
            return s.endswith(";")
    return False


def _cap(text, limit):
    if limit and len(text) > limit:
        half = limit // 2
        return "%s\n[... %d characters omitted ...]\n%s" % (
            text[:half], len(text) - 2 * half, text[-half:])
    return text


def _self_view():
    """What this process's /proc shows of its writes and descriptors: the
    bytes written through write(2) and its kin (wchar, or None: an
    undumpable process of an unprivileged user may not read its own io)
    and, for each descriptor, its offset, flags and file (or None when
    unreadable).  The server reads the same from outside when it may
    (supervisor/replay.c); where it may not (a server without
    CAP_SYS_PTRACE) this is what it has.  The descriptors this reading
    opens (on /proc) are left out."""
    global _cell_effect
    saved, _cell_effect = _cell_effect, None
    # Its own opens are no event of the cell's (the hints of a refusal
    # look at the latest ones).
    events = list(_events)
    wchar = fds = None
    try:
        try:
            fd = os.open("/proc/self/io", os.O_RDONLY | os.O_CLOEXEC)
            try:
                wchar = int(os.read(fd, 4096).split(b"wchar:", 1)[1].split()[0])
            finally:
                os.close(fd)
        except Exception:
            pass
        try:
            seen = {}
            d = os.open("/proc/self/fdinfo", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                for name in os.listdir(d):
                    try:
                        f = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=d)
                    except OSError:
                        continue  # closed since the listing (its own)
                    try:
                        info = os.read(f, 512)
                    finally:
                        os.close(f)
                    seen[int(name)] = dict(l.split(b":", 1) for l in info.split(b"\n")[:4] if b":" in l)
                proc_mnt = seen.get(d, {}).get(b"mnt_id")
            finally:
                os.close(d)
            fds = {k: v for k, v in seen.items() if v.get(b"mnt_id") != proc_mnt}
        except Exception:
            pass
        return wchar, fds
    finally:
        _cell_effect = saved
        _events[:] = events


def _self_effect(v0, v1, out):
    """Puts the cell's wchar and its first effect (_cell_effect, or a
    descriptor opened, closed or moved) in its result."""
    if v0[0] is not None and v1[0] is not None:
        out["wchar"] = max(0, v1[0] - v0[0])
    if out.get("effect"):
        return
    if v0[1] is None or v1[1] is None:
        out["effect"] = "descriptors not readable"
        return
    for fd in sorted(set(v0[1]) | set(v1[1])):
        a, b = v0[1].get(fd), v1[1].get(fd)
        if a != b:
            out["effect"] = "descriptor %d %s" % (
                fd, "opened" if a is None else "closed" if b is None else "moved")
            return


def _run_cell(code, cell):
    ns = _session["ns"]
    _history.append([cell, code])
    filename = "<cell %d>" % cell
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _events.clear()
    _current_cell[0] = cell
    out = {"status": "ok", "result": None, "error": None}
    tree = None
    me = os.getpid()
    exit_code = None
    global _cell_looked, _cell_effect
    _cell_looked = looked = []
    view0 = _self_view()
    _cell_effect = effect = []
    try:
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(code):
            last = tree.body.pop()
        if tree.body:
            exec(compile(tree, filename, "exec"), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), filename, "eval"), ns)
            if value is not None:
                ns["_"] = value
                limit = int(_cfg.get("max_result_chars", 8000))
                out["result"] = _cap(_frame_repr(value, limit), limit)
    except SystemExit as e:
        exit_code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if e.code not in (None, 0):
            out["status"] = "error"
            out["error"] = _describe(e)
    except MemoryError as e:
        # The memory limit: the server rolls the session back, since a
        # half-done allocation can leave objects in any state.
        out["status"] = "memory"
        out["error"] = _describe(e)
    except BaseException as e:  # KeyboardInterrupt included: the cell failed
        out["status"] = "error"
        out["error"] = _describe(e)
    finally:
        if os.getpid() != me:
            _end_forked_child(out, exit_code)
        _flush_figures(cell, out["status"] != "ok")
        _cell_looked = None
        if looked:
            out["import_read"] = _import_read(looked)
        if tree is not None:
            out["imports"] = _imports_of(tree)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        _cell_effect = None
        if effect:
            out["effect"] = str(effect[0])[:120]
        _self_effect(view0, _self_view(), out)
    return out


_exit = os._exit  # the cell may replace os._exit


def _end_forked_child(out, exit_code):
    """A process the cell forked reached the end of the cell (an exception,
    a MemoryError under RLIMIT_DATA, sys.exit, no os._exit): it ends here,
    as a script would (1 after an exception, sys.exit's own code).  It
    shares the session's control socket, so a result from it would stand
    for the session's own (several at once interleave into a frame the
    server cannot read); the figures are the session's to save."""
    err = out.get("error")
    if err and exit_code is None:
        msg = ("a process forked by this cell (pid %d) reached the end of the cell with an exception; "
               "it ended with exit status 1:\n%s\n" % (os.getpid(), (err.get("traceback") or err.get("message", "")).rstrip("\n")))
        try:
            sys.stderr.flush()
            os.write(2, msg.encode("utf-8", "replace"))
        except BaseException:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    if exit_code is None:
        exit_code = 0 if out.get("status") == "ok" else 1
    _exit(exit_code & 0xFF)


def _frame_repr(value, limit):
    """A DataFrame or Series as the cell's value, within the output limit
    the way pandas cuts one (rows and columns elided, the shape said)
    rather than cut in the middle of a row: first as pandas shows it,
    then with fewer rows, then with fewer columns."""
    text = _safe_repr(value)
    pd = sys.modules.get("pandas")
    if not limit or len(text) <= limit or pd is None or not isinstance(value, (pd.DataFrame, pd.Series)):
        return text
    try:
        rows = max(4, int(pd.get_option("display.min_rows") or 10))
        cols = max(4, int(pd.get_option("display.max_columns") or 20))
        while cols >= 4:
            with pd.option_context("display.max_rows", rows, "display.min_rows", rows, "display.max_columns", cols):
                text = _safe_repr(value)
            if len(text) <= limit:
                break
            cols //= 2
    except Exception:
        pass
    return text


def _safe_repr(value):
    try:
        return repr(value).replace("\0", "\\x00")  # a C string ends at NUL
    except BaseException as e:
        return "<repr failed: %s: %s>" % (type(e).__name__, e)


def _is_user_frame(filename):
    return filename.startswith("<cell ")


def _format_tb(e):
    """The user's own frames only (docs/TOOLS.md); each run of library
    frames is folded into one line naming the modules, so the model still
    sees that the error came from inside a library, and the exception line
    says why.  Repeated frames fold as CPython folds them ("[Previous line
    repeated N more times]"), and a traceback still too long keeps its head
    and its tail: the exception line is always the last thing the model
    reads, however deep the recursion was."""
    if isinstance(e, SyntaxError) and e.filename and _is_user_frame(e.filename):
        return _cap_tail("".join(traceback.format_exception_only(type(e), e)), _tb_budget())
    lines = []
    frames = traceback.extract_tb(e.__traceback__)
    # Drop the bootstrap's own frames at the top.
    while frames and not _is_user_frame(frames[0].filename):
        frames.pop(0)
    if frames:
        lines.append("Traceback (most recent call last):\n")
        i = 0
        while i < len(frames):
            j = i
            if _is_user_frame(frames[i].filename):
                while j < len(frames) and _is_user_frame(frames[j].filename):
                    j += 1
                # One StackSummary per run, so CPython's own folding of
                # repeated lines applies across the run.
                lines.extend(traceback.StackSummary.from_list(frames[i:j]).format())
                i = j
                continue
            mods = []
            while j < len(frames) and not _is_user_frame(frames[j].filename):
                m = _short_module(frames[j].filename)
                if m not in mods:
                    mods.append(m)
                j += 1
            lines.append("  [... %d frame%s in %s ...]\n" % (
                j - i, "" if j - i == 1 else "s", ", ".join(mods[:3])))
            i = j
    budget = _tb_budget()
    exc = _cap_tail("".join(traceback.format_exception_only(type(e), e)), budget // 4)
    body = "".join(_fold_blocks(lines))
    return _cap_middle(body, max(budget - len(exc), 200)) + exc


def _tb_budget():
    return max(int(_cfg.get("max_result_chars", 8000) or 8000), 1000)


def _fold_blocks(lines):
    """Runs of the same block of frames (mutual recursion through a
    library callback, a -> b -> a -> b ...) fold into one copy and a count,
    the way CPython folds a single repeated line."""
    out = []
    i = 0
    n = len(lines)
    while i < n:
        folded = False
        for size in range(2, 7):
            block = lines[i:i + size]
            if len(block) < size:
                break
            reps = 1
            while lines[i + reps * size:i + (reps + 1) * size] == block:
                reps += 1
            if reps > 3:
                out.extend(block * 3)
                out.append("  [Previous %d lines repeated %d more times]\n" % (size, reps - 3))
                i += reps * size
                folded = True
                break
        if not folded:
            out.append(lines[i])
            i += 1
    return out


def _cap_middle(text, limit):
    """Head and tail of text, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 5]
    tail = text[-(limit * 3 // 5):]
    head = head[: head.rfind("\n") + 1] or head
    nl = tail.find("\n")
    tail = tail[nl + 1:] if 0 <= nl < len(tail) - 1 else tail
    return "%s  [... %d characters of traceback omitted ...]\n%s" % (
        head, len(text) - len(head) - len(tail), tail)


def _cap_tail(text, limit):
    """An exception line too long to show whole keeps its start (the type)
    and its end."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return "%s [... %d characters omitted ...] %s" % (
        text[:half], len(text) - 2 * half, text[-half:])


def _short_module(path):
    for marker in ("dist-packages/", "site-packages/", "/python3."):
        k = path.find(marker)
        if k >= 0:
            rest = path[k + len(marker):]
            if marker == "/python3.":
                rest = rest.split("/", 1)[-1]
            return rest
    return os.path.basename(path)


# ---------------------------------------------------------------- refusals

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_FS_WRITE_EVENTS = {
    "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link",
    "os.chmod", "os.chown", "os.utime", "os.truncate", "shutil.copyfile",
    "shutil.move", "shutil.rmtree", "os.mkfifo", "os.mknod", "os.setxattr",
    "os.removexattr",
}
# What the host would see rather than where it is written: the kernel refuses
# these whatever the path (setuid and wide modes, ACLs, links and special
# files); the hint says so instead of "write under the workspace".
_HOST_EVENTS = {"os.chmod", "os.symlink", "os.mkfifo", "os.mknod", "os.setxattr",
                "os.removexattr"}
_SHELL_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                 "os.spawn", "os.startfile", "pty.spawn"}
_NET_EVENTS = {"socket.__new__", "socket.connect", "socket.bind",
               "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto",
               "socket.getnameinfo", "socket.gethostbyaddr"}


# Audit events that reach past the session's memory beyond the permission
# checks above: a database, a process signalled or forked, native code.
_EFFECT_EVENTS = {"sqlite3.connect", "os.fork", "os.forkpty", "os.kill", "os.killpg",
                  "ctypes.dlopen", "webbrowser.open"}
# While a cell runs: the first event that reached past the session's memory
# (the server checkpoints the cell rather than logging it for replay:
# supervisor/replay.c).  None outside a cell and while _self_view reads.
_cell_effect = None


def _audit(event, args):
    # Called for every audited operation: keep it cheap.
    if _cell_effect is not None and not _cell_effect and (
            event in _EFFECT_EVENTS or event in _FS_WRITE_EVENTS or event in _SHELL_EVENTS
            or event in _NET_EVENTS):
        _cell_effect.append(event)
    perm = None
    if event == "open":
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS)
        perm = "fs_write" if writing else "fs_read"
        if writing and _cell_effect is not None and not _cell_effect:
            _cell_effect.append("open for writing")
    elif event in _FS_WRITE_EVENTS:
        perm = "fs_write"
    elif event in _NET_EVENTS:
        # Unix sockets too: with net_access false the kernel refuses every
        # socket() (a host process may listen on one inside ROOT).
        if event == "socket.__new__" and len(args) > 1 and args[1] == 1 and _cfg.get(
                "net_access"):
            return
        perm = "net_access"
    elif event in _SHELL_EVENTS:
        perm = "shell_exec"
        if event == "os.system" and not _cfg.get("shell_exec"):
            # os.system fails silently (it returns a status): say why now.
            _log("os.system: denied by the sandbox policy (shell_exec: false): "
                 "running programs is not allowed; do the work in Python instead")
    if perm is None:
        return
    if len(_events) > 16:
        del _events[:8]
    detail = args[0] if args else ""
    _events.append((perm, detail if isinstance(detail, (str, bytes, int)) else "", event))


_HINTS = {
    "fs_write": "the sandbox allows writes only where fs_write permits "
                "(fs_write: {fs_write}); {instead}",
    "fs_read": "that path is not visible in the sandbox (fs_read: {fs_read}); "
               "put input files in {workspace}/",
    # A file the jail hides where the rest is readable: a secret (.env, a
    # key).  Saying "put input files in workspace/" here told an agent with
    # a shell to copy the secret to where the sandbox reads it.
    "fs_read_hidden": "the sandbox does not let code read that file (fs_read: {fs_read}): files "
                      "that hold secrets (.env, keys, credentials) are hidden from it. Do not copy such "
                      "a file into {workspace}/ to get around this: work without it, or ask the user "
                      "for what the task needs from it",
    "net_access": "the sandbox has no network (net_access: false); put input "
                  "files in {workspace}/ instead of downloading them",
    "shell_exec": "running programs is not allowed (shell_exec: false); do the "
                  "work in Python instead",
    "joblib": "running programs is not allowed (shell_exec: false), and joblib's "
              "loky and multiprocessing backends start new programs; use threads "
              "(joblib's default here): with joblib.parallel_backend(\"threading\"): ..., "
              "or multiprocessing.Pool, whose forked processes are allowed",
    "limits": "a sandbox limit was reached ({limit}); use less, or split the work",
    "host": "files the sandbox leaves on the host never carry setuid, setgid or "
            "sticky bits, group or other write, ACLs or extended attributes, and "
            "no symlink, FIFO, socket or device node is made there (fs_write: "
            "{fs_write}); keep modes like 644/755, copy instead of linking, use "
            "/tmp for scratch",
}


def _visible(path):
    """Whether the jail shows this path (ROOT when readable, the workspace,
    the interpreter's runtime); elsewhere a missing file means hidden."""
    try:
        path = os.path.abspath(path)
    except Exception:
        return True
    for prefix in _cfg.get("visible", []):
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            return True
    return False


def _denied_by(e):
    reason = getattr(e, "reason", None)
    if isinstance(reason, BaseException) and reason is not e:
        # urllib's URLError wraps the socket error that was refused.
        return _denied_by(reason)
    if isinstance(e, MemoryError):
        return "limits", "memory_mb: %s" % _cfg.get("memory_mb")
    if isinstance(e, RuntimeError) and "new thread" in str(e):
        return "limits", "max_processes: %s" % _cfg.get("max_processes")
    if not isinstance(e, OSError):
        # urllib wraps socket errors; follow the chain one level.
        inner = getattr(e, "reason", None) or e.__context__
        if isinstance(inner, OSError):
            return _denied_by(inner)
        return None, None
    code = e.errno
    if code == errno.EFBIG:
        return "limits", "max_file_mb: %s" % _cfg.get("max_file_mb")
    if code == errno.EAGAIN:
        # fork() or a thread refused by RLIMIT_NPROC.
        return "limits", "max_processes: %s" % _cfg.get("max_processes")
    if code in (errno.EPERM, errno.EACCES, errno.EROFS, errno.ENOENT,
                errno.EAFNOSUPPORT, errno.ENETUNREACH, errno.ECONNREFUSED) or (
            type(e).__name__ == "gaierror"):
        if _events:
            perm = _events[-1][0]
            if code == errno.ENOENT:
                # Missing because the jail hides it (a path outside what
                # the policy shows), not because it does not exist.
                detail = _events[-1][1]
                if perm not in ("fs_read", "fs_write") or not isinstance(detail, str) or _visible(detail):
                    return None, None
            if perm == "net_access" and _cfg.get("net_access"):
                return None, None
            if perm == "shell_exec" and _cfg.get("shell_exec"):
                return None, None
            if perm == "fs_read" and code in (errno.EROFS,):
                perm = "fs_write"
            if perm in ("fs_write", "fs_read") and code not in (
                    errno.EPERM, errno.EACCES, errno.EROFS, errno.ENOENT):
                return None, None
            event = _events[-1][2]
            if perm == "fs_write" and event in _HOST_EVENTS and (
                    event != "os.chmod" or code == errno.EPERM):
                return perm, "host"
            return perm, None
    return None, None


def _write_instead(last):
    """The path to write instead of the one refused: the same relative
    path under the workspace (ans.png -> workspace/ans.png), or the file's
    name there for a path elsewhere."""
    ws = _cfg.get("workspace_display", "workspace")
    generic = "write under %s/ instead, e.g. %s/outputs/" % (ws, ws)
    if not last or last[0] != "fs_write":
        return generic
    target = last[1]
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if not isinstance(target, str) or not target.strip():
        return generic
    root = _session.get("root") or os.getcwd()
    full = os.path.normpath(os.path.join(root, target))
    rel = os.path.relpath(full, root)
    if rel.startswith("..") or os.path.isabs(rel):
        rel = os.path.basename(full)
    ws_abs = os.path.normpath(os.path.join(root, ws))
    if not rel or full == ws_abs or full.startswith(ws_abs + "/"):
        return generic
    suggestion = "%s/%s" % (ws, rel)
    note = ""
    if "/" in rel:
        note = " (create its folder first: os.makedirs(%r, exist_ok=True))" % os.path.dirname(suggestion)
    return "write %s instead%s" % (suggestion, note)


def _describe(e):
    # The refused operation, before formatting the traceback adds reads of
    # source files to the events.
    last = _events[-1] if _events else None
    perm, limit = _denied_by(e)
    msg = str(e)
    err = {
        "type": type(e).__name__,
        "message": msg,
        "traceback": _format_tb(e),
        "denied_by": perm,
    }
    if perm:
        host = limit == "host"
        if host:
            limit = None
        if perm == "shell_exec" and any(ev[1] == _LOKY_DENIED for ev in _events):
            perm_hint = "joblib"
        elif perm == "fs_read" and last and last[0] == "fs_read" and isinstance(last[1], (str, bytes)) \
                and last[1] and _visible(os.fsdecode(last[1])):
            perm_hint = "fs_read_hidden"
        else:
            perm_hint = "host" if host else perm
        hint = _HINTS[perm_hint].format(
            instead=_write_instead(last),
            fs_write=_cfg.get("fs_write", "workspace"),
            fs_read=_cfg.get("fs_read", "true"),
            workspace=_cfg.get("workspace_display", "workspace"),
            limit=limit or "",
        )
        if limit:
            err["limit"] = limit
        err["hint"] = "denied by the sandbox policy (%s): %s" % (
            limit.split(":")[0] if limit else perm, hint)
    elif isinstance(e, ModuleNotFoundError):
        hint = _missing_module_hint(e)
        if hint:
            err["hint"] = hint
    elif isinstance(e, SyntaxError):
        hint = _notebook_syntax_hint(e)
        if hint:
            err["hint"] = hint
    return err


def _notebook_syntax_hint(e):
    """A line of IPython (%matplotlib inline, !pip install x) is a bare
    SyntaxError in plain Python: say what it is and what to do instead."""
    line = (e.text or "").strip() if isinstance(e.text, str) else ""
    if not line or line[0] not in "%!" or not (e.filename and _is_user_frame(e.filename)):
        return None
    if line[0] == "%":
        return ("IPython magics (%s) are not available: this is plain Python. Charts need no "
                "%%matplotlib: a figure left open or shown with plt.show() is saved under %s/outputs/ and "
                "returned; time code with the time or timeit module" % (
                    line.split()[0], _cfg.get("workspace_display", "workspace")))
    words = line[1:].split()
    if words[:1] in (["pip"], ["pip3"]) or words[:3] == ["python", "-m", "pip"] or words[:3] == ["python3", "-m", "pip"]:
        pkgs = [w for w in words[2:] if not w.startswith("-") and w not in ("install", "pip")]
        name = pkgs[0] if pkgs else "PACKAGE"
        return ("shell escapes (!...) are not available: this is plain Python, and code in the sandbox "
                "cannot install packages (no network, no programs). To add %s: %s" % (
                    name, _venv_hint(name, "")))
    if _cfg.get("shell_exec"):
        return ("shell escapes (!...) are not available: this is plain Python; run a program with "
                "subprocess.run([...], capture_output=True, text=True)")
    return ("shell escapes (!...) are not available: this is plain Python, and running programs is refused "
            "(shell_exec: false); do it in Python (os.listdir, open, shutil, pathlib)")


# import name -> (Debian package, distribution name for pip), for the
# modules an analyst reaches for most.
_PACKAGES = {
    "numpy": ("python3-numpy", "numpy"),
    "pandas": ("python3-pandas", "pandas"),
    "matplotlib": ("python3-matplotlib", "matplotlib"),
    "scipy": ("python3-scipy", "scipy"),
    "sklearn": ("python3-sklearn", "scikit-learn"),
    "statsmodels": ("python3-statsmodels", "statsmodels"),
    "seaborn": ("python3-seaborn", "seaborn"),
    "sympy": ("python3-sympy", "sympy"),
    "openpyxl": ("python3-openpyxl", "openpyxl"),
    "PIL": ("python3-pil", "pillow"),
    "xlrd": ("python3-xlrd", "xlrd"),
    "yaml": ("python3-yaml", "PyYAML"),
    "bs4": ("python3-bs4", "beautifulsoup4"),
    "lxml": ("python3-lxml", "lxml"),
    "networkx": ("python3-networkx", "networkx"),
    "skimage": ("python3-skimage", "scikit-image"),
    "cv2": ("python3-opencv", "opencv-python"),
    "xgboost": ("python3-xgboost", "xgboost"),
    "numba": ("python3-numba", "numba"),
    "h5py": ("python3-h5py", "h5py"),
    "tables": ("python3-tables", "tables"),
    "tabulate": ("python3-tabulate", "tabulate"),
    "geopandas": ("python3-geopandas", "geopandas"),
    "shapely": ("python3-shapely", "shapely"),
    "pyarrow": (None, "pyarrow"),
    "polars": (None, "polars"),
    "torch": (None, "torch"),
    "tensorflow": (None, "tensorflow"),
    "lightgbm": (None, "lightgbm"),
    "plotly": (None, "plotly"),
}
_USUAL_STACK = ("numpy", "pandas", "matplotlib", "scipy", "sklearn",
                "statsmodels", "seaborn", "sympy", "openpyxl")


def _missing_module_hint(e):
    """An import of a package that is not on this machine: say so, what of
    the usual stack is here, and how the user adds it (the code cannot:
    no network, no programs)."""
    import importlib.util

    name = (getattr(e, "name", None) or "").split(".")[0]
    if not name or name in sys.modules:
        return None
    try:
        if importlib.util.find_spec(name) is not None:
            return None  # present: a submodule or a broken install
    except Exception:
        return None
    have, lack = [], []
    for mod in _USUAL_STACK:
        try:
            found = mod in sys.modules or importlib.util.find_spec(mod) is not None
        except Exception:
            found = False
        if found:
            have.append(_with_version(mod))
        else:
            lack.append(mod)
    deb, pip_name = _PACKAGES.get(name, (None, name))
    how = []
    if deb:
        how.append("install the Debian package %s on the machine that runs the server "
                   "(scripts/setup.sh --full installs the usual data stack)" % deb)
    how.append(_venv_hint(pip_name, "or " if how else ""))
    return ("%s is not installed on this machine, and code in the sandbox cannot install it "
            "(no network, no programs). Installed here: %s%s. To add it: %s." % (
                name, ", ".join(have) or "none of the usual stack",
                "; not installed: %s" % ", ".join(lack) if lack else "", "; ".join(how)))


def _venv_in_use():
    """The venv whose site-packages the server added (VENV/lib/pythonX.Y/
    site-packages), or None."""
    for d in _cfg.get("site_dirs", []):
        return os.path.dirname(os.path.dirname(os.path.dirname(d)))
    return None


def _venv_hint(pip_name, lead):
    """How a venv can bring the package, as things stand: the venv in use,
    the project's venv waiting for the user's approval, a project venv made
    after the server started, or none yet."""
    root = _session.get("root") or "ROOT"
    used = _venv_in_use()
    if used:
        return ("%sinstall it into the venv this server uses, %s (%s/bin/pip install %s); "
                "a new package imports in the next call" % (lead, used, used, pip_name))
    proj = os.path.join(root, ".interpreter-venv")
    approve = "python-sandbox-mcp --trust --root '%s'" % root
    if _cfg.get("venv_withheld"):
        # There, but not approved, so not on the path: creating it again
        # would not help.
        return ("%sinstall it (pip install %s) in the project's venv %s, which exists but is not used until "
                "the user approves it by running, in a terminal, %s (then restarts the server)" % (
                    lead, pip_name, proj, approve))
    if os.path.isdir(proj):
        return ("%s%s exists, but this server does not use it: it was made after the server started. "
                "Install it there (%s/bin/pip install %s); a project's venv is used once the user approves it "
                "(%s, in a terminal) and restarts the server" % (lead, proj, proj, pip_name, approve))
    return ("%sstart the server with --venv DIR, or make the project's own venv %s "
            "(python3 -m venv --system-site-packages %s, which the user then approves with %s), holding a "
            "virtual environment where %s is installed (pip install %s)" % (
                lead, proj, proj, approve, pip_name, pip_name))


def _with_version(mod):
    m = sys.modules.get(mod)
    v = getattr(m, "__version__", None) if m is not None else None
    if not isinstance(v, str):
        try:
            import importlib.metadata as md

            v = md.version(_PACKAGES.get(mod, (None, mod))[1])
        except Exception:
            v = None
    return "%s %s" % (mod, v) if v else mod


# ---------------------------------------------------------------- figures

_orig_savefig = None


def _patch_metadata():
    """The namespace-free mode (Landlock + seccomp, no mount tree): the kernel
    refuses chmod, utime, chown and xattr changes everywhere, the workspace
    included, since a seccomp filter cannot tell which file they name.
    shutil.copy, copy2 and copytree still copy the data; the metadata step is
    skipped and said once on stderr.  (tarfile already goes on without it.)
    This only keeps the copies working: the refusal itself is the kernel's."""
    import shutil

    said = []

    def skip_metadata(fn):
        def wrapper(src, dst, *args, **kwargs):
            try:
                return fn(src, dst, *args, **kwargs)
            except PermissionError:
                if not said:
                    said.append(1)
                    _log("%s: file modes and times are not copied in this sandbox mode "
                         "(Landlock + seccomp: chmod and utime are refused); the data "
                         "was copied" % fn.__name__)
                return None

        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    shutil.copymode = skip_metadata(shutil.copymode)
    shutil.copystat = skip_metadata(shutil.copystat)


def _patch_matplotlib():
    global _orig_savefig
    import matplotlib.figure
    import matplotlib.pyplot as plt

    _orig_savefig = matplotlib.figure.Figure.savefig

    def savefig(self, *args, **kwargs):
        out = _orig_savefig(self, *args, **kwargs)
        # Only a file in the workspace comes back to the model: a chart
        # saved to a buffer or to /tmp is still shown by plt.show().
        fname = args[0] if args else kwargs.get("fname")
        if isinstance(fname, (str, os.PathLike)) and _in_workspace(fname):
            self._psm_saved = True
            # savefig drew the figure as it is, then put back what it had
            # changed for the file (dpi, face and edge colours, layout),
            # which marks the figure stale although nothing the user drew
            # changed: fig.savefig(p) was saved again at the end of the
            # cell.  A change made after this marks it stale again.
            self.stale = False
        return out

    matplotlib.figure.Figure.savefig = savefig
    plt.show = _show


def _figure_path(cell):
    """A name for a figure of this cell that no file has yet, claimed by
    creating it: another session (or this one before a reset or a restart
    of the server) may have a figure of the same cell and number."""
    name = _session["name"]
    prefix = "" if name == "default" else name + "-"
    outputs = _cfg.get("outputs_dir", "workspace/outputs")
    os.makedirs(outputs, exist_ok=True)
    while True:
        _session["figures"] += 1
        path = os.path.join(outputs, "%sfigure-%d-%d.png" % (prefix, cell, _session["figures"]))
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return path
        except FileExistsError:
            continue


def _in_workspace(path):
    try:
        ws = os.path.realpath(os.path.join(_session.get("root") or ".", _cfg.get("workspace_display", "workspace")))
        p = os.path.realpath(os.fspath(path))
    except (OSError, TypeError, ValueError):
        return False
    return p == ws or p.startswith(ws + os.sep)


def _has_data(fig):
    """Whether anything was drawn in the figure beyond empty axes."""
    if fig.texts or fig.images or fig.lines or fig.patches or fig.legends:
        return True
    return any(ax.has_data() or ax.texts or ax.tables or ax.artists for ax in fig.axes)


def _needs_saving(fig, raised=False):
    """A figure with something drawn (more than its background) that no
    savefig has written into the workspace as it is now: savefig draws it
    (stale False) and any later change sets stale.  After a cell that
    raised, empty axes (plt.subplots() before the error) are not a chart."""
    if len(fig.get_children()) <= 1:
        return False
    if raised and not _has_data(fig):
        return False
    return not (getattr(fig, "_psm_saved", False) and not fig.stale)


_current_cell = [0]


def _save_open_figures(cell, raised=False):
    """Saves every open figure that needs it under workspace/outputs/, then
    closes them all; returns the paths written."""
    import matplotlib.pyplot as plt

    saved = []
    for num in plt.get_fignums():
        fig = plt.figure(num)
        if not _needs_saving(fig, raised):
            continue
        path = _figure_path(cell)
        try:
            fig.savefig(path, dpi=100, bbox_inches="tight")
            saved.append(path)
        except OSError as e:
            _log("could not save an open figure: %s" % e)
            try:
                os.unlink(path)  # the name it claimed
            except OSError:
                pass
    plt.close("all")
    return saved


def _show(*args, **kwargs):
    """plt.show() in a headless sandbox: save every open figure under
    workspace/outputs/ so it is returned (not again when savefig wrote it as
    it is), never wait for a display."""
    _save_open_figures(_current_cell[0])
    return None


def _flush_figures(cell, raised=False):
    """Like a notebook's inline backend: figures left open at the end of a
    cell that were never saved are saved (so the model sees them), then all
    are closed so the next cell starts on a fresh canvas."""
    if sys.modules.get("matplotlib.pyplot") is None:
        return []
    try:
        return _save_open_figures(cell, raised)
    except Exception as e:
        _log("figure handling failed: %s" % e)
        return []


# ---------------------------------------------------------------- images


_THUMB_SIDE = 1568  # what a vision model takes in before it downscales itself


def _thumbnail(path, max_bytes):
    """A PNG of the image at path, at most _THUMB_SIDE pixels a side, then
    downscaled until it fits max_bytes.  The first step bounds the time the
    rest takes, whatever the image's size (an 8000x8000 noise PNG: 1.6 s
    against 14 s when every try encoded the full size).  The server checks
    the bytes again before returning them."""
    import io

    try:
        from PIL import Image
    except Exception:
        return b""
    try:
        with Image.open(path) as im:
            im.draft("RGB", (_THUMB_SIDE, _THUMB_SIDE))  # a JPEG decodes at a fraction
            im.load()
            img = im.convert("RGBA") if im.mode not in ("RGB", "RGBA", "L") else im.copy()
        img.thumbnail((_THUMB_SIDE, _THUMB_SIDE), Image.LANCZOS, reducing_gap=3.0)
    except Exception:
        return b""
    w, h = img.size
    scale = 1.0
    for _ in range(12):
        cur = img if scale == 1.0 else img.resize(
            (max(1, int(w * scale)), max(1, int(h * scale))), Image.LANCZOS)
        buf = io.BytesIO()
        cur.save(buf, format="PNG", optimize=True)
        data = buf.getvalue()
        if len(data) <= max_bytes:
            return data
        scale *= 0.7
    return b""


# ---------------------------------------------------------------- saved sessions
#
# Once a session rests (and before the server exits), a fork of its
# checkpoint runs save_state: it writes the session's state to a pipe that
# the server copies into workspace/.sessions/ and authenticates.  The first call after a restart gets it back through
# _restore, before its own code runs.  Functions and classes defined in
# cells are saved as their source (pickle can only name them), modules as
# the names to import, everything else with pickle protocol 5, whose
# out-of-band buffers carry numpy and pandas data without copying it.

_history = []  # [cell number, code] of every cell this session ran
_restore_fd = [-1, -1]
# The name in a restore's "failed" list when the snapshot as a whole could
# not be read (supervisor/saved.c says so as a restore that did not happen).
_SNAPSHOT_FAILED = "(the snapshot)"
_SAVE_MAGIC = b"PSMSAVE1"
_MAX_LISTED = 30


def restore_fd(arg):
    """The descriptors of the call that restores: "PIPE", or "FILE,SOCKET"
    when the server lets the session read the snapshot itself."""
    fds = [int(x) for x in arg.split(",")] + [-1]
    _restore_fd[0], _restore_fd[1] = fds[0], fds[1]
    return ""


_restored = []


def restore_load(msg_json):
    """Loads the saved state the cell came with (the zygote calls this
    before the cell, then tells the server the cell starts); handle()
    reports what came back in the cell's result."""
    del _restored[:]
    msg = json.loads(msg_json)
    if msg.get("op") == "exec" and msg.get("restore") and _restore_fd[0] >= 0 and not _history:
        _restored.append(_restore(_restore_fd[0], int(msg["restore"]), int(msg.get("restore_format", 1)),
                                  _restore_fd[1] if msg.get("restore_direct") else -1))
    return ""


def _le64(n):
    return int(n).to_bytes(8, "little")


def _reason(e):
    text = "%s: %s" % (type(e).__name__, e)
    return text if len(text) <= 200 else text[:197] + "..."


def _top_level_nodes(tree):
    """Statements at module level, also those inside if/for/while/with/try
    blocks (a def there still defines a global)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, []) or [])


def _cell_source(cell):
    for n, code in reversed(_history):
        if n == cell:
            return code
    return None


def _segment(code, node):
    import textwrap

    lines = code.splitlines(True)
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    text = "".join(lines[first - 1:node.end_lineno])
    return first, textwrap.dedent(text)


def _def_source(value):
    """[kind, cell, first line, source, its own name] for a function,
    lambda or class defined in a cell, else None."""
    if isinstance(value, types.FunctionType):
        fn = value.__code__.co_filename
        if not fn.startswith("<cell ") or value.__module__ != "__main__":
            return None
        try:
            cell = int(fn[6:-1])
        except ValueError:
            return None
        code = _cell_source(cell)
        if code is None:
            return None
        tree = ast.parse(code)
        line = value.__code__.co_firstlineno
        if value.__name__ == "<lambda>":
            for node in ast.walk(tree):
                if isinstance(node, ast.Lambda) and node.lineno == line:
                    seg = ast.get_source_segment(code, node)
                    if seg:
                        return ["lambda", cell, node.lineno, seg, value.__name__]
            return None
        for node in _top_level_nodes(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == value.__name__:
                first, src = _segment(code, node)
                if line in (first, node.lineno):
                    return ["def", cell, first, src, node.name]
        return None
    if isinstance(value, type) and value.__module__ == "__main__":
        for cell, code in reversed(_history):
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue
            for node in _top_level_nodes(tree):
                if isinstance(node, ast.ClassDef) and node.name == value.__name__:
                    first, src = _segment(code, node)
                    return ["class", cell, first, src, node.name]
    return None


def _write_all(fd, data):
    view = memoryview(data).cast("B")
    off = 0
    while off < len(view):
        off += os.write(fd, view[off:off + (1 << 20)])


def _closed_file(value):
    import io

    try:
        return isinstance(value, io.IOBase) and value.closed is True
    except Exception:
        return False


def save_state(arg_json):
    """Runs in a throw-away fork of the checkpoint: user code that runs
    while pickling (__reduce__, __getstate__) changes nothing that lives
    on.  Writes PSMSAVE1, the length, then the state."""
    import pickle

    arg = json.loads(arg_json)
    fd, cap = int(arg["fd"]), int(arg["cap"])
    ns = _session["ns"] or {}
    imports, defs, unsaved, names, chunks = [], [], [], [], []
    for name, value in list(ns.items()):
        if name.startswith("__") or name == "_":
            continue
        if isinstance(value, types.ModuleType):
            imports.append([name, value.__name__])
            continue
        if _closed_file(value):
            continue  # f of a finished with open(...): nothing to keep, nothing lost
        try:
            src = _def_source(value)
        except Exception:
            src = None
        if src is not None:
            defs.append([name] + src)
            continue
        if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", "") == "__main__":
            unsaved.append([name, "its source was not found in the cell history"])
            continue
        bufs = []
        try:
            data = pickle.dumps(value, protocol=5, buffer_callback=bufs.append)
            raws = [b.raw() for b in bufs]
        except BaseException as e:  # whatever a __reduce__ raises
            unsaved.append([name, _reason(e)])
            continue
        names.append([name, [len(data)] + [r.nbytes for r in raws]])
        chunks.append(data)
        chunks.extend(raws)
    meta = json.dumps({
        "version": 1, "history": _history, "imports": imports, "defs": defs,
        "unsaved": unsaved, "vars": names, "figures": _session["figures"],
    }).encode("utf-8")
    # First, what the server reads for the next reply (it parses nothing
    # else of the state): what could not be saved, at most 30 names.
    # Held to the bounds of proto/result.h (struct save_summary).
    listed, more = _wire_list(unsaved, True)
    summary = json.dumps({"unsaved": listed, "unsaved_more": more}).encode("utf-8")
    total = 16 + len(summary) + len(meta) + sum(memoryview(c).nbytes for c in chunks)
    _write_all(fd, _SAVE_MAGIC + _le64(total))
    if total > cap:
        return ""  # the server reads the length and says why
    _write_all(fd, _le64(len(summary)) + summary + _le64(len(meta)) + meta)
    for c in chunks:
        _write_all(fd, c)
    return ""


_PREFAULT_MIN = 8 << 20
_MADV_POPULATE_WRITE = 23


def _populator(buf):
    """A function that faults in n bytes of buf from offset off at once
    (MADV_POPULATE_WRITE; ctypes releases the GIL while it runs), True when
    it did; None when it cannot be called (then the reads that fill buf
    fault its pages in themselves, one trap per page).  Measured on the
    test machine: 100 MB faulted in by it in 27 ms, by touching each page
    in 37 to 44."""
    try:
        import ctypes

        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        ref = ctypes.c_char.from_buffer(buf)
        addr = ctypes.addressof(ref)
        del ref  # the mapping stays: the caller holds buf while it calls
    except Exception:
        return None
    return lambda off, n: madvise(addr + off, n, _MADV_POPULATE_WRITE) == 0


def _prefault(buf):
    """A thread that faults in the pages of a large fresh mapping ahead of
    the reads that fill it (_populator, 1 MiB at a time): the faults run
    on the CPU the reads leave idle.  Measured on the test machine: 1 GiB
    read from a pipe in 0.49 to 0.60 s instead of 0.71 to 0.90.  None when
    it cannot run; the reads then fault the pages in themselves."""
    populate = _populator(buf)
    if populate is None:
        return None
    n, stop = len(buf), []

    def run():
        step = 1 << 20
        for off in range(0, n, step):
            if stop or not populate(off, min(step, n - off)):
                return

    t = _helper_thread(run, (), "psm-restore-prefault")
    return (t, stop) if t else None


def _helper_thread(target, args, name):
    """A started daemon thread, or None when none can be started
    (max_processes): the caller then does its work itself."""
    import threading

    t = threading.Thread(target=target, args=args, name=name, daemon=True)
    try:
        t.start()
    except RuntimeError:
        return None
    return t


def _fresh_buffer(n):
    """Memory for n bytes of the state about to be read into it: a large
    buffer (a numpy or pandas block, which is then built on it without a
    copy) is fresh private memory, faulted in as the bytes arrive, where
    bytearray(n) writes zeros over all of it first (0.5 s of the restore of
    a 1 GiB array on the test machine).  Not huge pages (MADV_HUGEPAGE):
    measured on the test machine, a VM whose free memory goes back to its
    host, each fresh huge page cost the host a fault, and a cold 1 GiB
    restore took 3 to 4.7 times cat's read of the file instead of 0.5 to
    1.4."""
    return bytearray(n) if n < (1 << 20) else mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


class _Stream:
    """Exactly `total` bytes from the server, then its one-byte verdict."""

    def __init__(self, fd, total):
        self.f = os.fdopen(fd, "rb", buffering=0, closefd=False)
        self.left = total

    def read(self, n):
        if n > self.left:
            raise ValueError("the snapshot's records overrun it")
        buf = _fresh_buffer(n)
        helper = _prefault(buf) if n >= _PREFAULT_MIN else None
        view = memoryview(buf)
        got = 0
        try:
            while got < n:
                k = self.f.readinto(view[got:])
                if not k:
                    raise EOFError("the snapshot ended early")
                got += k
        finally:
            if helper is not None:
                helper[1].append(1)  # stop
                helper[0].join()
        self.left -= n
        return buf

    def verdict(self):
        view = memoryview(bytearray(min(self.left, 1 << 20)))
        while self.left:
            k = self.f.readinto(view[:min(self.left, len(view))])
            if not k:
                raise EOFError("the snapshot ended early")
            self.left -= k
        return bytes(self.read_verdict())

    def read_verdict(self):
        b = self.f.read(1)
        return b or b"N"


class _Direct:
    """The body read from the snapshot file itself, while the server's lease
    keeps every writer out (supervisor/persist.c): one copy, from the page
    cache straight into the buffer the state is built on, by two threads on
    alternate MiBs of a large buffer (the GIL is released while they read),
    instead of the server's copy into a pipe and this one's out of it.  The
    session says on the socket how far it has read (the server drops from
    the page cache what both are done with) and reads the verdict there
    once it has read all it will."""

    _STEP = 8 << 20  # between two words on the socket

    def __init__(self, fd, sock, total):
        self.fd, self.sock, self.total = fd, sock, total
        self.off = self.told = 0

    def _tell(self, off, force=False):
        if force or off - self.told >= self._STEP:
            _write_all(self.sock, _le64(off))
            self.told = off

    def _fill(self, view, base, k, stride, done, errs, tell=None, populate=None):
        """Reads every stride-th MiB of view from the k-th, from base, each
        MiB faulted in at once first when populate is given (a thread that
        faults ahead, as _Stream has, would take a core from the two that
        read here and from the server's tag, all three bound by the CPU
        when the file is in the page cache: measured on the test machine,
        a warm 100 MB restore in 42 ms this way, 52 with that thread, 48
        with the reads' own faults)."""
        step, n = 1 << 20, len(view)
        for at in range(k * step, n, stride * step):
            end = min(at + step, n)
            if populate and not populate(at, end - at):
                populate = None  # refused (an older kernel): the reads fault the pages in
            while at < end:
                if errs:
                    return
                try:
                    got = os.preadv(self.fd, [view[at:end]], base + at)
                except OSError as e:
                    errs.append(e)
                    return
                if not got:
                    errs.append(EOFError("the snapshot ended early"))
                    return
                at += got
            done[k] += 1
            if tell:
                tell()

    def read(self, n):
        if n > self.total - self.off:
            raise ValueError("the snapshot's records overrun it")
        buf = _fresh_buffer(n)
        view, done, errs = memoryview(buf), [0, 0], []
        helper = populate = None
        if n >= _PREFAULT_MIN:
            populate = _populator(buf)
            helper = _helper_thread(self._fill, (view, self.off, 1, 2, done, errs, None, populate), "psm-restore-read")
        step = 1 << 20

        def tell():
            # What both threads have read is a prefix of the buffer.
            prefix = min(2 * done[0], 2 * done[1] + 1) if helper else done[0]
            self._tell(self.off + min(prefix * step, n))

        try:
            self._fill(view, self.off, 0, 2 if helper else 1, done, errs, tell, populate)
        finally:
            if helper:
                helper.join()
        if errs:
            raise errs[0]
        if sum(done) != (n + step - 1) // step:  # the helper died some other way
            raise EOFError("the snapshot was not read whole")
        self.off += n
        self._tell(self.off)
        return buf

    def verdict(self):
        if self.told < self.total:
            try:
                self._tell(self.total, True)
            except OSError:  # the server has answered and hung up already
                pass
        return os.read(self.sock, 1) or b"N"


def _restore(fd, total, layout=1, sock=-1):
    """Reads the snapshot (streamed by the server on fd, or with sock, read
    from the file fd itself), and loads it only when the server's verdict
    after the last byte says it wrote those bytes.  Layout
    2 starts with the saver's summary record (for the server's note), which
    layout 1 (an older server's) did not have."""
    import importlib
    import pickle

    stream = _Direct(fd, sock, total) if sock >= 0 else _Stream(fd, total)
    meta, blobs, problem = None, [], None
    try:
        if layout >= 2:
            stream.read(int.from_bytes(stream.read(8), "little"))
        meta = json.loads(bytes(stream.read(int.from_bytes(stream.read(8), "little"))))
        for name, lengths in meta["vars"]:
            blobs.append((str(name), [stream.read(int(n)) for n in lengths]))
    except Exception as e:
        problem = _reason(e)
    try:
        ok = stream.verdict() == b"Y"
    except Exception:
        ok = False
    if not ok:
        return {"verified": False}
    if problem is not None or not isinstance(meta, dict):
        return {"verified": True, "restored": [], "failed": [[_SNAPSHOT_FAILED, problem or "malformed"]],
                "unsaved": []}
    ns = _session["ns"]
    restored, failed = [], []
    for cell, code in meta.get("history", []):
        _history.append([int(cell), str(code)])
        filename = "<cell %d>" % int(cell)
        linecache.cache[filename] = (len(code), None, str(code).splitlines(True), filename)
    _session["figures"] = int(meta.get("figures", 0))
    for name, module in meta.get("imports", []):
        try:
            ns[name] = importlib.import_module(module)
            restored.append(name)
        except BaseException as e:
            failed.append([name, _reason(e)])

    def define(d):
        name, kind, cell, first, src, own = d
        filename = "<cell %d>" % int(cell)
        pad = "\n" * (int(first) - 1)
        if kind == "lambda":
            ns[name] = eval(compile(pad + "(" + src + ")", filename, "eval"), ns)
        else:
            exec(compile(pad + src, filename, "exec"), ns)
            if own != name:
                ns[name] = ns[own]

    later = []
    for d in sorted(meta.get("defs", []), key=lambda d: int(d[2])):
        try:
            define(d)
            restored.append(d[0])
        except BaseException:
            later.append(d)  # may need a variable restored below
    for name, parts in blobs:
        try:
            ns[name] = pickle.loads(parts[0], buffers=parts[1:])
            restored.append(name)
        except BaseException as e:
            failed.append([name, _reason(e)])
    for d in later:
        try:
            define(d)
            restored.append(d[0])
        except BaseException as e:
            failed.append([d[0], _reason(e)])
    return {"verified": True, "restored": restored, "failed": failed,
            "unsaved": meta.get("unsaved", [])}
