# _psm, part 2 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): the learned warm-up: the modules the zygote imports before any
# session, and the probe that checks each one.

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
