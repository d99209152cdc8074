# _psm, part 6 of 7 (interp/bootstrap_py.S joins the parts into one module,
# in order): figures and images: matplotlib's figures saved after each cell,
# the thumbnails of the reply.

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
