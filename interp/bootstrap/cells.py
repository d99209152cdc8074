# _psm, part 4 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): a cell: the result's shape on the wire, running the code, its
# traceback.

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
    and, for each descriptor, the first lines of its fdinfo (offset,
    flags, file), or None when unreadable.  The server reads the same from
    outside when it may (supervisor/replay.c); where it may not (a server
    without CAP_SYS_PTRACE) this is what it has.  Read in C
    (_psm_native.self_view: no audit hook runs, so the reading is no event
    of the cell's; the descriptors it opens, on /proc, are left out)."""
    try:
        return _native_self_view()
    except Exception:
        return None, None


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


_kept_view = [None]  # (pid, _self_view()) after the last cell, for the next


def _run_cell(code, cell, self_view=True):
    """Runs one cell.  self_view: read what /proc shows of this process
    before and after (_self_view), for a server that cannot read it from
    outside; one that can says so, and the reading (a listing of the
    descriptors, about 60 us on the test machine) is left out."""
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
    # The view after the last cell stands for the one before this cell
    # when this process took it (after a rollback the process is another):
    # half the reading, and whatever moved in between (a thread, the
    # bootstrap) is the next cell's, never no one's.
    kept, _kept_view[0] = _kept_view[0], None
    view0 = (kept[1] if kept and kept[0] == me else _self_view()) if self_view else None
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
        # An import statement holds the word: without it, no walk of the
        # tree (about 7 us of a warm `1+1`).
        if tree is not None and "import" in code:
            out["imports"] = _imports_of(tree)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        _cell_effect = None
        if effect:
            out["effect"] = str(effect[0])[:120]
        elif _file_mapped[0]:
            out["effect"] = "shared memory or a file mapped for writing by a cell"
        if view0 is not None:
            view1 = _self_view()
            _self_effect(view0, view1, out)
            if view1[1] is not None:
                _kept_view[0] = (me, view1)
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
