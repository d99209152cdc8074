# _psm, part 7 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): saved sessions: the state pickled for the server, and restored
# from it.

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
# A state this large or larger is sent in pieces (supervisor/persist.h):
# each record cut into pieces of at most _PIECE bytes, and a piece of at
# least _KNOWN_MIN bytes that the server already holds (its label is among
# the "known" ones) named by its label instead of sent again.  So a save
# after a change to one column of a large frame sends about that column.
_PIECES_MAGIC = b"PSMSAVE2"
_PIECES_MIN = 16 << 20
_PIECE = 1 << 20
_KNOWN_MIN = 64 << 10
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
    rows = []  # per chunk: the length of its rows (_row_bytes), or 0
    families = {}  # _family(name, value): [(name, value)], in the namespace's order
    pickler = _pickler_class()
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
        families.setdefault(_family(name, value), []).append((name, value))

    def record(value, label, together=None):
        """One record: value pickled, with its out-of-band buffers; its
        reason when it cannot be."""
        bufs = []
        try:
            data = _dumps(value, bufs.append, pickler)
            raws = [b.raw() for b in bufs]
            rows.extend([0] + [_row_bytes(b) for b in bufs])
        except BaseException as e:  # whatever a __reduce__ raises
            del rows[len(chunks):]
            return _reason(e)
        names.append([label, [len(data)] + [r.nbytes for r in raws]] + ([together] if together else []))
        chunks.append(data)
        chunks.extend(raws)
        return None

    for members in families.values():
        if len(members) > 1 and record(tuple(v for _, v in members), members[0][0], [n for n, _ in members]) is None:
            continue
        # Alone, or a family that cannot be pickled whole: name by name,
        # so that one member that cannot be saved costs only itself.
        for name, value in members:
            why = record(value, name)
            if why is not None:
                unsaved.append([name, why])
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
    head = _le64(len(summary)) + summary + _le64(len(meta)) + meta
    if total >= _PIECES_MIN and total <= cap:
        _write_pieces(fd, total, [(head, 0)] + list(zip(chunks, rows)), arg.get("known") or "")
        return ""
    _write_all(fd, _SAVE_MAGIC + _le64(total))
    if total > cap:
        return ""  # the server reads the length and says why
    _write_all(fd, head)
    for c in chunks:
        _write_all(fd, c)
    return ""


# Values whose identity means nothing (the interpreter shares small ints,
# short strings, None, True among unrelated names): each in its own record.
_ATOMS = (int, float, complex, str, bytes, bool, type(None))


def _family(name, value):
    """The record a variable's value is pickled in, as a key: the figure
    of a matplotlib artist (or of the first of a list, tuple or object
    array of them), else the value itself (its name for an atom).  The
    names of one family are pickled together, as one tuple, so that what
    they share comes back shared.  Pickled name by name, `fig, ax =
    plt.subplots()` came back as two figures, ax drawing in one that was
    no longer fig (a title set after a restart never reached
    fig.savefig), and each save pickled the figure twice; `b = a` came
    back as two copies, twice the memory."""
    if type(value) in _ATOMS:
        return name
    try:
        figure = sys.modules.get("matplotlib.figure")
        if figure is not None:
            probe = value
            if type(value) in (list, tuple) and value:
                probe = value[0]
            elif type(value).__name__ == "ndarray" and value.dtype.kind == "O" and value.size:
                probe = value.flat[0]
            if isinstance(probe, sys.modules["matplotlib.artist"].Artist):
                fig = probe if isinstance(probe, figure.Figure) else getattr(probe, "figure", None)
                if isinstance(fig, figure.Figure):
                    return id(fig)
    except Exception:
        pass
    return id(value)


# An object array of at least this many elements, each an exact str, an
# exact float or None, is saved as codes into its distinct values
# (_pickler_class).
_STR_CODES_MIN = 1 << 16


def _pickler_class():
    """A Pickler that saves large object arrays of strings as codes, out
    of band; None without numpy.  Pickle writes an object array one
    element at a time, in band: at 4M rows a frame's three string columns
    took most of each save's CPU, at every save, changed or not.  As codes
    they are one pass in C (interp/strcodes.c), and a column unchanged
    since the last save gives the same codes, whose pieces the server
    holds already.  Missing values among the strings (NaN, None) are
    values of the table too: a column read from a CSV file with gaps is
    as common as a full one.  Dates and durations go out of band as their
    integers (_times_reduce)."""
    import pickle

    np = sys.modules.get("numpy")
    if np is None:
        return None
    from _psm_native import str_codes

    ndarray = np.ndarray

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj):
            if type(obj) is not ndarray:
                return NotImplemented
            if obj.dtype.kind in "mM":
                return _times_reduce(obj)
            if obj.size < _STR_CODES_MIN or obj.dtype.kind != "O":
                return NotImplemented
            c = obj.flags.c_contiguous
            # A pandas block's columns are its rows: one run each.
            rows = obj.shape[0] if c and obj.ndim >= 2 and obj.size // obj.shape[0] >= _STR_CODES_MIN else 1
            runs = str_codes(obj, rows)
            if runs is None:
                return NotImplemented
            return _strs_decode, (obj.shape, "C" if c else "F",
                                  [(d, pickle.PickleBuffer(b), w) for d, b, w in runs])

    return Pickler


def _times_reduce(obj):
    """A datetime64 or timedelta64 array, out of band.  NumPy pickles
    these in band whatever the protocol (it will not export their memory
    as a buffer), so a frame's timestamp column was copied into the pickle
    at every save (at 4M rows 32 MB, with the fresh memory it grew into:
    most of a save's CPU when nothing had changed), and its pieces moved
    with whatever came before it in the pickle.  Its memory as 8-byte
    integers is exported like any numeric column: unchanged since the last
    save, the server holds its pieces already.  Its dtype is kept whole,
    byte order too (NumPy's own pickle turns a big-endian one native)."""
    import pickle

    if obj.nbytes < _KNOWN_MIN or obj.dtype.itemsize != 8 or obj.dtype.str[0] not in "<>":
        return NotImplemented
    if obj.flags.c_contiguous:
        order = "C"
    elif obj.flags.f_contiguous:
        order = "F"
    else:
        return NotImplemented
    return _times_decode, (pickle.PickleBuffer(obj.view(obj.dtype.str[0] + "i8")), obj.dtype.str, obj.shape, order)


def _times_decode(buf, dtype, shape, order):
    """An array saved by _times_reduce, made again on the restored bytes
    (no copy), as NumPy makes its own out-of-band arrays."""
    import numpy as np

    return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape, order=order)


def _dumps(value, buffer_callback, pickler):
    import io
    import pickle

    if pickler is None:
        return pickle.dumps(value, protocol=5, buffer_callback=buffer_callback)
    f = io.BytesIO()
    pickler(f, protocol=5, buffer_callback=buffer_callback).dump(value)
    return f.getvalue()


def _strs_decode(shape, order, runs):
    """An object array saved by _pickler_class, made again."""
    import numpy as np

    out = np.empty(shape, dtype=object, order=order)
    flat = (out.T if order == "F" else out).reshape(-1)  # a view, in memory order
    step = flat.size // max(len(runs), 1)
    kinds = {1: np.uint8, 2: np.uint16, 4: np.uint32}
    for i, (distinct, codes, width) in enumerate(runs):
        table = np.empty(len(distinct), dtype=object)
        table[:] = distinct
        flat[i * step:(i + 1) * step] = table[np.frombuffer(codes, dtype=kinds[width])]
    return out


def _row_bytes(pb):
    """The length of a row of a C-contiguous array of two or more
    dimensions (pandas keeps the columns of one type as the rows of one
    such block), when a row is large enough to be a piece of its own; else
    0.  Pieces that start at rows stay the same when a column is added,
    dropped or replaced, which moves the others within the block."""
    try:
        m = memoryview(pb)
        if m.ndim >= 2 and m.c_contiguous and m.strides[0] >= _KNOWN_MIN:
            return m.strides[0]
    except Exception:
        pass
    return 0


def _cuts(view, row):
    """The pieces of a record: its rows (row bytes each, or the whole of
    it), each cut every _PIECE bytes."""
    step = row or len(view) or 1
    for start in range(0, len(view), step):
        end = min(start + step, len(view))
        for off in range(start, end, _PIECE):
            yield view[off:min(off + _PIECE, end)]


def _write_pieces(fd, total, records, known_hex):
    """The state in pieces: PSMSAVE2, the length, then per piece "N",
    its length, its label and its bytes, or "S", its length and the label
    of a piece the server holds.  The first piece (the summary's) is always
    sent."""
    from _psm_native import label

    known = {bytes.fromhex(known_hex[i:i + 32]) for i in range(0, len(known_hex), 32)}
    _write_all(fd, _PIECES_MAGIC + _le64(total))
    small = bytearray()  # small pieces, sent together (the server bounds the count)

    def send(piece, tag):
        _write_all(fd, b"N" + len(piece).to_bytes(4, "little") + tag)
        _write_all(fd, piece)

    first = True
    for rec, row in records:
        for piece in _cuts(memoryview(rec).cast("B"), row):
            n = len(piece)
            if n < _KNOWN_MIN:
                if len(small) + n > _PIECE:
                    send(small, bytes(16))
                    small.clear()
                small += piece
                continue
            if small:
                send(small, bytes(16))
                small.clear()
                first = False
            tag = label(piece)
            if not first and tag in known:
                _write_all(fd, b"S" + n.to_bytes(4, "little") + tag)
                continue
            first = False
            send(piece, tag)
    if small:
        send(small, bytes(16))


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
        for rec in meta["vars"]:
            # [name, lengths], or [first name, lengths, names] for a
            # family pickled together (save_state).
            together = [str(n) for n in rec[2]] if len(rec) > 2 else None
            blobs.append((str(rec[0]), [stream.read(int(n)) for n in rec[1]], together))
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
    for name, parts, together in blobs:
        try:
            value = pickle.loads(parts[0], buffers=parts[1:])
            if together is None:
                ns[name] = value
                restored.append(name)
                continue
            if type(value) is not tuple or len(value) != len(together):
                raise ValueError("a record of %d names holds no tuple of as many values" % len(together))
            for n, v in zip(together, value):
                ns[n] = v
            restored.extend(together)
        except BaseException as e:
            failed.extend([n, _reason(e)] for n in (together or [name]))
    for d in later:
        try:
            define(d)
            restored.append(d[0])
        except BaseException as e:
            failed.append([d[0], _reason(e)])
    return {"verified": True, "restored": restored, "failed": failed,
            "unsaved": meta.get("unsaved", [])}
