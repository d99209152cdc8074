# _psm, part 3 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): a session's life: its start, its checkpoints and rollbacks, a
# call's message.

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
    """In a process that becomes the session (a resumed checkpoint, a copy
    made by fork_from): what the process it was forked from left behind."""
    import random

    # The view kept by the last cell is another process's, even when this
    # one's pid is the same (the dead session's pid, reused): the first
    # cell here reads its own, or something moved there would pass as
    # unmoved here (a descriptor moved back to where the view saw it).
    _kept_view[0] = None
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
        out = _run_cell(msg["code"], cell, not msg.get("no_self_view"))
        if restored is not None:
            out["restore"] = restored
        return _wire_result(out)
    if kind == "thumb":
        return _thumbnail(msg["path"], int(msg.get("max_bytes", 262144)))
    return _wire_result({"status": "error", "error": {"type": "ProtocolError", "message": "unknown op"}})
