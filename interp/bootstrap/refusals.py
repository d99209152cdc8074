# _psm, part 5 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): refusals: the audit hook that names the permission behind an
# error, and the hints that say what to do instead.

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
# Set for good once a cell maps memory that may be shared (mmap.mmap but
# with ACCESS_READ (1) or ACCESS_COPY (3); numpy.memmap in r+ or w+ mode):
# from then on any cell may store into a file with no system call, which
# neither the kernel's counters nor the server's view see, or into memory
# the checkpoint shares (mmap.mmap(-1, n)), which a rollback does not put
# back; a cell run again would store a second time.  So every later cell
# reports it as an effect (a checkpoint, never a line in the replay log).
# Only during a cell: the bootstrap's own private mappings do not count.
_file_mapped = [False]


def _audit(event, args):
    # Called for every audited operation: keep it cheap.
    if _cell_effect is not None and not _cell_effect and (
            event in _EFFECT_EVENTS or event in _FS_WRITE_EVENTS or event in _SHELL_EVENTS
            or event in _NET_EVENTS):
        _cell_effect.append(event)
    if event == "mmap.__new__" and _cell_effect is not None and (
            len(args) < 3 or args[2] not in (1, 3)):
        _file_mapped[0] = True
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
