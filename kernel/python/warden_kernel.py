"""Warden's Python kernel: a live interpreter driven over the kernel protocol.

It runs inside a sandboxed worker and is the only thing the supervisor talks
to (docs/kernel-protocol.md is the contract). It is responsible for:

* the channel: reading `execute` frames from fd 3 ($WARDEN_CHANNEL_FD) and
  writing `ready` / `display_data` / `execute_result` / `error` / `done`
  frames back, never losing or interleaving a frame;
* one persistent user namespace (a `__main__` module) in which every cell
  runs, with Jupyter's rules: the value of a trailing expression is the
  cell's result, `_` holds the last result, `display()` is a builtin;
* stdout/stderr: unbuffered text streams straight onto fds 1 and 2, so
  output is seen while the cell runs and is in the pipes before `done`;
* rich output: MIME bundles from `_repr_*_` methods, and matplotlib figures
  rendered to PNG at `plt.show()` and at the end of every cell;
* errors: tracebacks of the user's frames only (`<cell N>`), exactly the
  raised type name and message, SystemExit reported rather than obeyed;
* interrupts: SIGINT raises KeyboardInterrupt while user code runs and is
  ignored while the kernel itself works or waits for the next cell;
* IPython's display machinery (IPython.display: display(), HTML, Image,
  ...), routed to display_data, with only what it needs of IPython
  imported on first use (_LazyPackage);
* IPython's `!cmd` and `%pip` lines (warden_magics.py, loaded only for a
  cell that does not compile as Python), and the user site pip installs
  into (docs/runtime.md).

Standard library only, and nothing imported per cell: a trivial cell costs a
frame read, one parse, one exec and a frame write.
"""

import _signal
import _thread
import ast
import binascii
import builtins
import codecs
import faulthandler
import io
import json
import linecache
import os
import signal
import sys
import types

MAX_FRAME = 64 << 20          # the supervisor rejects larger kernel frames
# Any one text in a frame (a repr, an evalue, a traceback line) is cut to
# this many characters when it is made, so a 100 MB repr costs a few copies
# of 8 MB rather than of 100 MB (the sandbox's memory is small), and a frame
# of a handful of texts fits in MAX_FRAME.
MAX_TEXT = 8 << 20
MAX_IMAGE = 32 << 20          # bytes before base64; larger images are dropped
MAX_HEADER = 128              # "execute <id> <nbytes>" is far shorter
CO_COROUTINE = 0x0080         # inspect.CO_COROUTINE, without importing inspect
COMPILE_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT   # `await` in a cell, as in Jupyter
MAIN_THREAD = _thread.get_ident()

# (MIME type, method) pairs probed on results and display() arguments, in the
# order Jupyter front ends prefer them.
REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
)
BINARY_MIME = ("image/png", "image/jpeg")


VERBS = (b"execute", b"env", b"snapshot", b"restore")


class ProtocolError(Exception):
    """The supervisor sent something that is not a frame: the stream is lost."""


# --------------------------------------------------------------------------
# Interrupts
#
# The SIGINT handler is installed for the kernel's whole life and decides by
# mode. Python runs handlers between bytecodes of the main thread, so the
# KeyboardInterrupt can only surface inside `call_user`, which brackets every
# piece of user code; the kernel's own code (frame I/O, tracebacks) never
# sees it. Between cells a SIGINT is ignored. Inside a cell, one that lands
# while only the kernel runs (between a cell's statements and its trailing
# expression, say, where a SIGINT was once lost and the cell ran on) is kept
# and raised at the first line of user code that runs next, so that it is
# never lost and its traceback names the cell. While a frame is being
# written from inside a cell (display(), plt.show()) the interrupt is
# deferred, so a frame is never cut in half.
#
# A cell that awaits runs in the kernel's asyncio loop (LOOP). A SIGINT
# that lands in the user's code there (a coroutine's own statements, a
# library it calls) raises at once, as anywhere else. One that lands in
# asyncio's own machinery (the loop waiting in select, scheduling a
# callback, being made) does not raise there, which could leave the loop
# broken and would show asyncio's frames: it cancels the cell's task
# instead, as asyncio.Runner does for Ctrl-C, and the cell ends with a
# KeyboardInterrupt whose traceback is the user's frames where the task
# was waiting. A second SIGINT before the cancellation took raises at once.

IDLE, USER, DEFER, LOOP = 0, 1, 2, 3


class _Interrupts:
    mode = IDLE
    pending = False    # a SIGINT the cell has not yet been interrupted by
    forked = False     # set in a child of os.fork(), see run_cell
    received = 0       # SIGINTs so far
    # LOOP: the cell's asyncio loop and task, and whether a SIGINT asked
    # for the task's cancellation.
    loop = None
    task = None
    cancelling = False


def _after_fork_in_child():
    _Interrupts.forked = True


def _on_sigint(signum, frame):
    _Interrupts.received += 1
    mode = _Interrupts.mode
    if mode == USER:
        if _user_code_runs(frame):
            raise KeyboardInterrupt
        # The kernel's own code around a piece of the cell (its user code
        # just ended, or has not begun): kept for the first user code to run.
        _Interrupts.pending = True
        _arm()
        return
    if mode == LOOP:
        if _Interrupts.cancelling or _user_code_runs(frame):
            raise KeyboardInterrupt
        _Interrupts.cancelling = True
        # The cancellation happens in the loop, between its callbacks; this
        # also wakes the loop from its select.
        _Interrupts.loop.call_soon_threadsafe(_cancel_task, _Interrupts.task)
        return
    if mode == DEFER:
        _Interrupts.pending = True
    # IDLE: ignored; a blocking read/write is retried by Python (PEP 475).


def _cancel_task(task):
    if not task.done():
        task.cancel()


STDLIB = os.path.dirname(ast.__file__) + os.sep


def _is_user_code(code):
    """A cell's code, or any module's outside the standard library and the
    kernel (a package the user's code calls)."""
    name = code.co_filename
    return not (name.startswith(STDLIB) or name.startswith("<frozen ") or name in KERNEL.kernel_files)


def _user_code_runs(frame):
    """Whether the stack from `frame` out holds a frame of the user's. If
    not, only the kernel (between two pieces of a cell) or asyncio's
    machinery (the loop of a cell that awaits) is running."""
    while frame is not None:
        if _is_user_code(frame.f_code):
            return True
        frame = frame.f_back
    return False


def call_user(fn, *args):
    """Runs user code (or kernel code acting for it) interruptibly. A SIGINT
    kept while the kernel worked inside the cell is raised at the first line
    of user code that runs (_arm), so its traceback shows where the cell was
    stopped."""
    previous = _Interrupts.mode
    _Interrupts.mode = USER
    try:
        if _Interrupts.pending:
            _arm()
        return fn(*args)
    finally:
        _Interrupts.mode = previous
        _disarm()


# A kept interrupt is raised by a trace function (sys.settrace) at the first
# line of the next user frame to run in USER mode; it is set only while an
# interrupt is kept, so cells never run traced otherwise. A user's own trace
# function (a debugger) is never replaced: the interrupt is raised at once.


def _arm():
    if sys.gettrace() is None:
        sys.settrace(_on_call)
    elif sys.gettrace() is not _on_call:
        _Interrupts.pending = False
        raise KeyboardInterrupt


def _disarm():
    if sys.gettrace() is _on_call:
        sys.settrace(None)


def _on_call(frame, event, arg):
    return _on_line if _Interrupts.mode == USER and _is_user_code(frame.f_code) else None


def _on_line(frame, event, arg):
    if event != "line" or _Interrupts.mode != USER or not _Interrupts.pending:
        return _on_line
    frame.f_trace = None
    _Interrupts.pending = False
    _disarm()
    raise KeyboardInterrupt


# --------------------------------------------------------------------------
# The channel


def parse_env(body):
    """An `env` frame's body: `<length>:<KEY=value>` entries, the variables
    of the `execute` of the same id (for that cell only)."""
    env, i = {}, 0
    while i < len(body):
        colon = body.index(b":", i)
        n = int(body[i:colon])
        key, _, value = body[colon + 1:colon + 1 + n].partition(b"=")
        env[os.fsdecode(key)] = os.fsdecode(value)
        i = colon + 1 + n
    return env


class CellEnvironment:
    """The `env` frame of a cell (parse_env), set in os.environ (and so in
    the C environment: getenv, subprocesses) while the cell runs, and the
    previous values put back after it. `take(verb, id, body)` keeps an env
    frame and answers True; `with cell_env.around(id):` then runs the
    `execute` of that id in it."""

    def __init__(self):
        self.pending = None
        self.saved = {}

    def take(self, verb, request_id, body):
        if verb != b"env":
            return False
        self.pending = (request_id, parse_env(body))
        return True

    def around(self, request_id):
        env = self.pending[1] if self.pending and self.pending[0] == request_id else {}
        self.pending = None
        self.saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.saved = {}
        return False


class Channel:
    """Frames over one stream fd: text header, then a body of known length."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.lock = _thread.allocate_lock()   # user threads may display()

    def read_request(self):
        """Returns (verb, id, body bytes), or None once the supervisor hung
        up. The verb is b"execute" (the body is a cell's code), b"snapshot"
        or b"restore" (the body is JSON naming the archive, see
        warden_snapshot.py)."""
        newline = self.buf.find(b"\n")
        while newline < 0:
            if len(self.buf) > MAX_HEADER:
                raise ProtocolError("header too long: %r" % bytes(self.buf[:MAX_HEADER]))
            if not self._fill(4096):
                if self.buf:
                    raise ProtocolError("channel closed inside a header")
                return None
            newline = self.buf.find(b"\n")
        parts = bytes(self.buf[:newline]).split(b" ")
        if len(parts) != 3 or parts[0] not in VERBS or not (parts[1].isdigit() and parts[2].isdigit()):
            raise ProtocolError("bad header: %r" % bytes(self.buf[:newline]))
        end = newline + 1 + int(parts[2])
        while len(self.buf) < end:
            if not self._fill(max(4096, min(end - len(self.buf), 1 << 24))):
                raise ProtocolError("channel closed inside a frame")
        body = bytes(self.buf[newline + 1:end])
        del self.buf[:end]
        return parts[0], int(parts[1]), body

    def _fill(self, size):
        # The buffer holds whatever was read so far, so an interrupted read
        # loses nothing; the handler does not raise while idle, but a stray
        # KeyboardInterrupt (a handler the user installed) is survived too.
        while True:
            try:
                data = os.read(self.fd, size)
                break
            except KeyboardInterrupt:
                continue
        self.buf += data
        return bool(data)

    def send(self, msg):
        self.send_body(encode_body(msg))

    def send_body(self, body):
        frame = b"%d\n%s" % (len(body), body)
        # Defer interrupts while the frame is written: a half-written frame
        # would make the supervisor declare the session lost.
        in_main = _thread.get_ident() == MAIN_THREAD
        if in_main:
            previous = _Interrupts.mode
            _Interrupts.mode = DEFER
        try:
            with self.lock:
                self._write_all(frame)
        finally:
            if in_main:
                _Interrupts.mode = previous
        if in_main and _Interrupts.pending:
            if previous in (USER, LOOP):
                # Written for user code (a coroutine's too): raised here.
                _Interrupts.pending = False
                raise KeyboardInterrupt
            if previous == IDLE:
                _Interrupts.pending = False     # between cells: ignored
            # DEFER: the kernel's own work in a cell; call_user raises it.

    def _write_all(self, data):
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            # The supervisor is gone; nobody is left to report to.
            os._exit(1)


def encode_body(msg):
    body = _dumps(msg)
    if len(body) > MAX_FRAME:
        body = _dumps(_shrink(msg))
    return body


def _dumps(msg):
    # allow_nan=False: NaN is not JSON (it can only come from display(raw=True)).
    text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (str(exc) of undecodable data) have no UTF-8 form:
        # a UTF-16 round trip turns them into U+FFFD and keeps real pairs.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return text.encode("utf-8")


def _shrink(msg):
    """Cuts the largest strings of a message until its frame fits."""
    budget = MAX_FRAME // 4
    while True:
        small = _truncate(msg, budget)
        if len(_dumps(small)) <= MAX_FRAME or budget < 1024:
            return small
        budget //= 2


def _truncate(value, budget):
    if isinstance(value, str) and len(value) > budget:
        return value[:budget] + "\n[... %d characters cut by Warden]" % (len(value) - budget)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in BINARY_MIME and isinstance(v, str) and len(v) > budget:
                continue   # a cut image is no image
            out[k] = _truncate(v, budget)
        return out
    if isinstance(value, list):
        return [_truncate(v, budget) for v in value]
    return value


# --------------------------------------------------------------------------
# stdout / stderr


def _stdio_errors(exc):
    """Encoding fallback: bytes smuggled in as surrogates (surrogateescape)
    go out as the original bytes; any other unencodable character as \\uXXXX."""
    out = bytearray()
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(code - 0xDC00)
        else:
            out += ("\\u%04x" % code if code <= 0xFFFF else "\\U%08x" % code).encode()
    return bytes(out), exc.end


codecs.register_error("warden.stdio", _stdio_errors)


class _FullWriter(io.FileIO):
    """Unbuffered fd writer that never drops the tail of a partial write
    (a signal can cut a large write to a full pipe short)."""

    def write(self, data):
        view = memoryview(data).cast("B")
        total = len(view)
        done = io.FileIO.write(self, view)
        while done is not None and done < total:
            done += io.FileIO.write(self, view[done:]) or 0
        return total


def open_stdio(fd):
    """A text stream that writes through to fd on every write, like `python -u`."""
    raw = _FullWriter(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="warden.stdio",
                            newline="\n", write_through=True)


# --------------------------------------------------------------------------
# Rich output


def mime_bundle(obj):
    """Jupyter-style MIME bundle: _repr_mimebundle_, then _repr_*_, then repr."""
    data = {}
    if isinstance(obj, type):
        return {"text/plain": repr(obj)}   # a class's _repr_html_ is unbound
    method = _repr_method(obj, "_repr_mimebundle_")
    if method is not None:
        bundle = _call_repr(obj, method, include=None, exclude=None)
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if isinstance(bundle, dict):
            for mime, value in bundle.items():
                _put(data, mime, value)
    for mime, name in REPR_METHODS:
        if mime in data:
            continue
        method = _repr_method(obj, name)
        if method is not None:
            _put(data, mime, _call_repr(obj, method))
    if "image/png" not in data and _is_figure(obj):
        data["image/png"] = _b64(figure_png(obj))
    if _is_figure(obj):
        _put_chart(data, obj)
    elif _is_dataframe(obj):
        _put_dataframe(data, obj)
    if "text/plain" not in data:
        data["text/plain"] = cap_text(repr(obj))
    # text/plain first: the most readable order in logs and JSON dumps.
    return {"text/plain": data.pop("text/plain"), **data}


def _repr_method(obj, name):
    try:
        method = getattr(obj, name, None)
    except Exception:
        return None
    if method is None or not callable(method):
        return None
    # Objects whose __getattr__ answers every name (mocks, proxies) would
    # claim every format; IPython detects them with a canary, so do we.
    try:
        if getattr(obj, "_warden_canary_method_should_not_exist_", None) is not None:
            return None
    except Exception:
        return None
    return method


def _call_repr(obj, method, **kwargs):
    try:
        return method(**kwargs)
    except Exception as exc:
        # Like IPython: a broken formatter costs that format, not the result.
        sys.stderr.write("%s.%s failed: %s: %s\n" % (
            type(obj).__name__, getattr(method, "__name__", "repr"), type(exc).__name__, exc))
        return None


def _put(data, mime, value):
    if isinstance(value, tuple):          # (data, metadata), as IPython allows
        value = value[0] if value else None
    if value is None:
        return
    if mime in BINARY_MIME:
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = _b64(value) if len(value) <= MAX_IMAGE else None
        if isinstance(value, str) and len(value) <= MAX_IMAGE * 4 // 3 + 4:
            data[mime] = value
    elif mime == "application/json" or mime.endswith("+json"):
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError:
                return
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            return
        data[mime] = value
    elif isinstance(value, bytes):
        data[mime] = cap_text(value.decode("utf-8", "replace"))
    elif isinstance(value, str):
        data[mime] = cap_text(value)


def _oom_score():
    try:
        with open("/proc/self/oom_score_adj") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1000


def _set_oom_score(value):
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass        # never below what the process may set: the snapshot goes on


def cap_text(text):
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "\n[... %d characters cut by Warden]" % (len(text) - MAX_TEXT)


def _b64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _is_figure(obj):
    figure_mod = sys.modules.get("matplotlib.figure")
    return figure_mod is not None and isinstance(obj, figure_mod.Figure)


def _is_dataframe(obj):
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, pandas.DataFrame)


CHART_MIME = "application/vnd.warden.chart+json"
DATAFRAME_MIME = "application/vnd.warden.dataframe+json"
MAX_DATAFRAME_CELLS = 1 << 20   # larger frames go without their data form


def _put_chart(data, fig):
    """The figure's chart (warden_charts.py), read from its objects; a figure
    it cannot read goes without one, as E2B's goes with an empty one."""
    try:
        chart = load_sibling("warden_charts").figure_chart(fig)
    except Exception:
        return
    if chart is not None:
        _put(data, CHART_MIME, chart)


def _put_dataframe(data, frame):
    """A DataFrame's columns as JSON lists (E2B's `data`): numbers, text,
    booleans, dates in ISO form, missing values as null."""
    if frame.size > MAX_DATAFRAME_CELLS:
        return
    try:
        columns = {str(name): [_json_value(v) for v in values]
                   for name, values in frame.to_dict(orient="list").items()}
    except Exception:
        return
    _put(data, DATAFRAME_MIME, columns)


def _json_value(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if hasattr(value, "isoformat"):         # datetime, date, pandas.Timestamp
        try:
            return None if value != value else value.isoformat()   # NaT != NaT
        except Exception:
            return str(value)
    item = getattr(value, "item", None)     # numpy scalars
    if item is not None:
        try:
            plain = item()
        except Exception:
            return str(value)
        if plain is not value and not hasattr(plain, "item"):
            return _json_value(plain)
    return str(value)


def figure_png(fig):
    buf = io.BytesIO()
    # bbox_inches="tight" as Jupyter's inline backend: no clipped labels.
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


# --------------------------------------------------------------------------
# Matplotlib and PIL
#
# Figures are rendered where Jupyter's inline backend renders them: at
# plt.show() and at the end of every cell, then closed. plt.show() on Agg
# does nothing and leaves figures open, so a loop of plot/show would draw
# every curve into one figure; the kernel therefore replaces pyplot.show as
# soon as pyplot is imported (by a warm import or by the user). The backend
# stays Agg ($MPLBACKEND), which subprocesses inherit and understand.
#
# PIL images are shown the way E2B's code interpreter shows them: show()
# displays the image (there is no image viewer in a sandbox), and save() to
# a file name displays it too, then saves.


def _patch_pyplot(module):
    module.show = pyplot_show


def _patch_pil_image(module):
    image_class = module.Image
    if getattr(image_class.save, "_warden_original", None) is not None:
        return
    original_save = image_class.save

    def show(self, title=None, **ignored):
        """Displays the image (as display_data), like E2B's code interpreter."""
        display(self)

    def save(self, fp, format=None, **params):
        # matplotlib's savefig("plot.png") saves through PIL: that is no
        # image of the user's to show.
        if isinstance(fp, (str, os.PathLike)) and \
                not sys._getframe(1).f_globals.get("__name__", "").startswith("matplotlib"):
            display(self)
        return original_save(self, fp, format, **params)

    save._warden_original = original_save
    save.__doc__ = original_save.__doc__
    image_class.show = show
    image_class.save = save


# IPython's display machinery (E2B's interpreter is IPython): display(),
# publish_display_data(), update_display(), display_html() and the rest
# send display_data through this kernel, where without an InteractiveShell
# IPython would print the objects' str(). Display ids are accepted (a
# DisplayHandle comes back); an update is shown as a new output, and
# clear_output() clears nothing, as the output is a stream.


def _patch_ipython_display(module):
    def ipython_display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None,
                        raw=False, clear=False, **kwargs):
        KERNEL.display(objs, raw=raw)
        if display_id:
            return module.DisplayHandle(None if display_id is True else display_id)
        return None

    def publish_display_data(data, metadata=None, source=None, *, transient=None, **kwargs):
        KERNEL.display((data,), raw=True)

    def update_display(obj, *, display_id, **kwargs):
        kwargs.pop("display_id", None)
        ipython_display(obj, **kwargs)

    def clear_output(wait=False):
        pass

    for function in (ipython_display, publish_display_data, update_display, clear_output):
        original = getattr(module, function.__name__.replace("ipython_", ""), None)
        if original is not None:
            function.__doc__ = original.__doc__
    ipython_display.__name__ = ipython_display.__qualname__ = "display"
    module.display = ipython_display
    module.publish_display_data = publish_display_data
    module.update_display = update_display
    module.clear_output = clear_output
    # Modules that copied the names before this patch (a warm import).
    for name in ("IPython.display", "IPython.core.display"):
        copied = sys.modules.get(name)
        if copied is not None:
            for attr in ("display", "publish_display_data", "update_display", "clear_output"):
                if hasattr(copied, attr):
                    setattr(copied, attr, getattr(module, attr))


# Modules patched as soon as they are imported, and what patches them.
IMPORT_PATCHES = {"matplotlib.pyplot": _patch_pyplot, "PIL.Image": _patch_pil_image,
                  "IPython.core.display_functions": _patch_ipython_display}


class _LazyPackage:
    """sys.meta_path finder for packages (IPython) whose __init__ imports far
    more than their submodules need: `from IPython.display import display`
    loads IPython.display and what it imports (tens of milliseconds), not
    IPython's terminal, magics and profiler (a second or more). The package
    module is made without running its __init__; the first attribute asked
    of it that is not a submodule already imported (IPython.get_ipython,
    IPython.__version__) runs __init__ into it then, so the package is whole
    from that point on."""

    PACKAGES = ("IPython",)

    def find_spec(self, name, path=None, target=None):
        if name not in self.PACKAGES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
                spec.loader = _LazyPackageLoader(spec.loader)
                return spec
        return None


class _LazyPackageLoader:
    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):          # get_source, is_package, ...
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        loader = self._loader
        state = {"whole": False}

        def complete():
            if state["whole"]:
                return
            state["whole"] = True
            del module.__getattr__
            loader.exec_module(module)

        def module_getattr(name):
            if name.startswith("__") and name.endswith("__") and name not in ("__version__", "__all__"):
                raise AttributeError(name)
            complete()
            return getattr(module, name)

        module.__getattr__ = module_getattr


class _ImportHook:
    """sys.meta_path finder that patches the modules of IMPORT_PATCHES once
    each is loaded, then leaves sys.meta_path."""

    def __init__(self, pending):
        self.pending = dict(pending)

    def find_spec(self, name, path=None, target=None):
        patch = self.pending.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self, name, patch)
                return spec
        return None

    def done(self, name):
        self.pending.pop(name, None)
        if not self.pending:
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]


class _PatchingLoader:
    def __init__(self, loader, hook, name, patch):
        self._loader = loader
        self._hook = hook
        self._name = name
        self._patch = patch

    def __getattr__(self, name):          # get_source, is_package, ...
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)
        self._hook.done(self._name)


def install_import_patches():
    """Patches the modules already imported (warm imports, a zygote's), and
    hooks the import of the others."""
    pending = {}
    for name, patch in IMPORT_PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
        else:
            pending[name] = patch
    if pending:
        sys.meta_path.insert(0, _ImportHook(pending))
    if not any(isinstance(finder, _LazyPackage) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LazyPackage())


def pyplot_show(*args, **kwargs):
    """Shows every open figure now (as display_data) and closes it, like
    Jupyter's inline backend. Arguments such as block= are accepted and ignored."""
    KERNEL.flush_figures()


# --------------------------------------------------------------------------
# Tracebacks


def error_message(exc, kernel_files):
    """ename/evalue/traceback of an exception, without the kernel's frames
    (those of the files in kernel_files)."""
    _strip_kernel_frames(exc, kernel_files, set())
    if isinstance(exc, SyntaxError) and exc.text is None and exc.filename and exc.lineno:
        # Errors found compiling the AST ('return' outside function) carry
        # no source line; the cell's lines are in linecache.
        exc.text = linecache.getline(exc.filename, exc.lineno) or None
    ename = type(exc).__name__
    try:
        evalue = str(exc)
    except Exception:
        evalue = "<str() of the exception failed>"
    try:
        import traceback   # only when a cell failed; cached after the first
        if len(evalue) > MAX_TEXT:
            # Not formatted whole (nor its chained exceptions): too big.
            evalue = cap_text(evalue)
            text = "Traceback (most recent call last):\n%s%s: %s" % (
                "".join(traceback.format_tb(exc.__traceback__)), ename, evalue)
        else:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        text = "%s: %s\n" % (ename, evalue)
    return {"ename": ename, "evalue": evalue, "traceback": [cap_text(line) for line in text.splitlines()]}


def _strip_kernel_frames(exc, kernel_files, seen):
    """Rebuilds the traceback of exc (and of its causes) without kernel frames.

    A cell that awaits runs under the kernel's asyncio loop, so an exception
    leaving it passes the kernel, then asyncio's frames down to the cell's
    coroutine (if that is on the stack at all): those go too. An interrupt
    keeps none of asyncio's frames (nor selectors', where the loop waits):
    it shows the user's code it stopped, wherever in the loop it landed."""
    asyncio_mod = sys.modules.get("asyncio")
    asyncio_dir = os.path.dirname(asyncio_mod.__file__) + os.sep if asyncio_mod else "\0"
    selectors_file = os.path.join(STDLIB, "selectors.py")
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        entries = []
        tb = exc.__traceback__
        from_kernel = tb is not None and tb.tb_frame.f_code.co_filename in kernel_files
        while tb is not None:
            # (An interrupt raised by a trace function, _on_line, lists its
            # frame twice in Python 3.11: once is enough.)
            if tb.tb_frame.f_code.co_filename not in kernel_files and not (
                    entries and entries[-1].tb_frame is tb.tb_frame and entries[-1].tb_lineno == tb.tb_lineno):
                entries.append(tb)
            tb = tb.tb_next
        if isinstance(exc, KeyboardInterrupt):
            entries = [e for e in entries if not e.tb_frame.f_code.co_filename.startswith(asyncio_dir)
                       and e.tb_frame.f_code.co_filename != selectors_file]
        elif from_kernel and entries and entries[0].tb_frame.f_code.co_filename.startswith(asyncio_dir):
            cells = [i for i, e in enumerate(entries) if e.tb_frame.f_code.co_filename.startswith("<cell ")]
            entries = entries[cells[0]:] if cells else []
        rebuilt = None
        for entry in reversed(entries):
            rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
        exc.__traceback__ = rebuilt
        if exc.__cause__ is not None:
            _strip_kernel_frames(exc.__cause__, kernel_files, seen)
        exc = exc.__context__


# --------------------------------------------------------------------------
# The kernel


class Kernel:
    def __init__(self, channel):
        self.channel = channel
        self.count = 0
        self.cell_id = None           # id of the running cell, for display()
        self.shown = []               # figures display()ed in this cell
        self.loop = None              # asyncio loop for cells that `await`
        self.last_result = None       # what `_` was last set to
        self.kernel_file = call_user.__code__.co_filename
        # Frames of these files are the kernel's, never shown in tracebacks.
        self.kernel_files = (self.kernel_file, magics_file(self.kernel_file))
        self.namespace = self._make_namespace()
        self.stdout = open_stdio(1)
        self.stderr = open_stdio(2)
        self.stdin = sys.stdin if sys.stdin is not None else io.StringIO()
        self.restore_stdio()

    @staticmethod
    def _make_namespace():
        # The user's namespace is a real __main__ module, as in IPython, so
        # pickle and multiprocessing find functions and classes defined in
        # cells. The kernel's own module stays alive under a private name
        # (it already has it when a zygote loaded it, see python_zygote.cc).
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        sys.modules["_warden_kernel"] = sys.modules[__name__]
        sys.modules["__main__"] = main
        return main.__dict__

    # ---- one cell

    def run_cell(self, cell_id, code):
        self.count += 1
        count = self.count
        self.cell_id = cell_id
        filename = "<cell %d>" % count
        body = last = error = None
        # From here to done, a SIGINT interrupts this cell (call_user).
        _Interrupts.pending = False
        _Interrupts.mode = DEFER
        try:
            body, last = self.compile_cell(code.decode("utf-8"), filename)
            if body is not None:
                call_user(self.execute, body)
            if last is not None:
                call_user(self.publish_result, call_user(self.execute, last), count)
        except BaseException as exc:       # SystemExit included, as in Jupyter
            error = exc
        if _Interrupts.forked:
            # A child of os.fork() that ran off the end of the cell must not
            # answer on the parent's channel (a second done frame).
            self.end_streams()
            os._exit(0 if error is None else 1)
        error = self.end_figures(error)
        # The cell's code is over: a SIGINT now is one between cells.
        _Interrupts.mode = IDLE
        _Interrupts.pending = False
        _disarm()
        self.end_streams()
        self.cell_id = None
        self.shown.clear()
        if error is None and not _defines_code(body) and not _defines_code(last):
            # Nothing made in this cell can show up in a later traceback.
            linecache.cache.pop(filename, None)
        if error is None:
            status = "ok"
        else:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "error"
            self.report_error(cell_id, error)
        # The one frame every cell sends: formatted directly, not by json.
        self.channel.send_body(b'{"type":"done","id":%d,"execution_count":%d,"status":"%s"}'
                               % (cell_id, count, status.encode()))

    def compile_cell(self, source, filename):
        """One parse; the trailing expression, if any, is compiled apart."""
        # Lines as the tokenizer counts them (str.splitlines would also split
        # at \f, \u2028, ... inside string literals and shift line numbers).
        lines = [line + "\n" for line in source.split("\n")]
        # Registered before compiling, so SyntaxErrors and later tracebacks
        # (and inspect.getsource) show the cell's lines.
        linecache.cache[filename] = (len(source), None, lines, filename)
        transformed = None
        try:
            tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST | COMPILE_FLAGS)
        except SyntaxError:
            # A cell indented as a whole (code pasted from inside a block, or
            # from an indented string in the caller's program) runs
            # dedented, as IPython runs it; line numbers stay the cell's.
            dedented = _dedent(source)
            if dedented is not None:
                return self.compile_cell(dedented, filename)
            # `!cmd`, `x = !cmd` and `%magic` lines are never Python, so only
            # a cell that fails to compile is searched for them.
            if "!" not in source and "%" not in source:
                raise
            transformed = load_magics().transform(source)
            if transformed is None:
                raise
        if transformed is not None:
            # Line for line the cell, so errors and tracebacks point at its lines.
            tree = compile(transformed, filename, "exec", ast.PyCF_ONLY_AST | COMPILE_FLAGS)
            lines = [line + "\n" for line in transformed.split("\n")]
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(lines, tree.body[-1]):
            expr = tree.body.pop()
            last = compile(ast.Expression(expr.value), filename, "eval", COMPILE_FLAGS)
        body = compile(tree, filename, "exec", COMPILE_FLAGS) if tree.body else None
        return body, last

    def execute(self, code):
        value = eval(code, self.namespace)
        if code.co_flags & CO_COROUTINE:   # top-level await
            value = self.run_coroutine(value)
        return value

    def run_coroutine(self, coro):
        """Runs a cell's coroutine to its end in the kernel's loop; an
        interrupt cancels it (see Interrupts) and is its KeyboardInterrupt."""
        previous = _Interrupts.mode
        _Interrupts.mode = DEFER      # making the loop and task: asyncio's code
        try:
            import asyncio
            loop = self.event_loop()
            earlier = asyncio.all_tasks(loop)
            task = loop.create_task(coro)
            _Interrupts.loop, _Interrupts.task, _Interrupts.cancelling = loop, task, False
            _Interrupts.mode = LOOP
            if _Interrupts.pending:
                _Interrupts.pending = False
                _disarm()
                _Interrupts.cancelling = True
                loop.call_soon(_cancel_task, task)
            try:
                return loop.run_until_complete(task)
            except BaseException as exc:
                # Interrupted (or failed): the SIGINT may have landed in a
                # child task (one of a gather), leaving the cell's own task
                # pending, or the other way round; either way nothing of
                # this cell may resume, or raise, in a later cell's loop
                # run. A leftover that the interrupt reaches re-raises it
                # and adds its frames to it: the traceback is the one it
                # had here.
                traceback = exc.__traceback__
                interrupted = _Interrupts.cancelling and isinstance(exc, asyncio.CancelledError)
                # A SIGINT while they unwind raises at once (a leftover that
                # will not end is given up with its loop).
                _Interrupts.cancelling = True
                self.cancel_leftovers(asyncio, loop, earlier)
                if not interrupted:
                    exc.__traceback__ = traceback
                    raise
                # The task cancelled for a SIGINT: the interrupt, with the
                # frames where the cell was waiting (not the CancelledError
                # and its asyncio context: from None).
                interrupt = KeyboardInterrupt()
                interrupt.__traceback__ = traceback
                raise interrupt from None
        finally:
            _Interrupts.mode = previous
            _Interrupts.loop = _Interrupts.task = None
            _Interrupts.cancelling = False

    def cancel_leftovers(self, asyncio, loop, earlier):
        """Cancels every task the cell started and runs the loop until they
        have ended. A round ends early when one re-raises the interrupt (it
        reached it through a gather). A new SIGINT meanwhile, or tasks still
        running after three rounds, leave the loop behind with them, closed:
        no later cell runs them, and the next cell that awaits gets a new
        loop."""
        received = _Interrupts.received
        for _ in range(3):
            leftovers = [t for t in asyncio.all_tasks(loop) if t not in earlier and not t.done()]
            if not leftovers:
                return
            for t in leftovers:
                t.cancel()
            try:
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            except BaseException:
                if _Interrupts.received != received:
                    break
        leftovers = [t for t in asyncio.all_tasks(loop) if t not in earlier and not t.done()]
        if leftovers or _Interrupts.received != received:
            for t in leftovers:
                t._log_destroy_pending = False    # given up on purpose
            self.loop = None
            try:
                loop.close()
            except Exception:
                pass    # left running by the interrupt: only dropped

    def event_loop(self):
        if self.loop is None or self.loop.is_closed():
            import asyncio
            self.loop = asyncio.new_event_loop()
        return self.loop

    def publish_result(self, value, count):
        if value is None:
            return
        data = mime_bundle(value)
        if _is_figure(value):
            self.shown.append(value)
        self._remember(value)
        self.channel.send({"type": "execute_result", "id": self.cell_id,
                           "execution_count": count, "data": data})

    def _remember(self, value):
        # _, __, ___ as in IPython, unless the user took `_` for themselves
        # (gettext, `for _ in ...`).
        ns = self.namespace
        if "_" in ns and ns["_"] is not self.last_result:
            return
        ns["___"] = ns.get("__")
        ns["__"] = ns.get("_")
        ns["_"] = self.last_result = value

    def display(self, objs, raw=False):
        for obj in objs:
            data = obj if raw and isinstance(obj, dict) else mime_bundle(obj)
            if _is_figure(obj):
                self.shown.append(obj)
            if self.cell_id is None:
                # No cell to attach it to (a thread between cells): keep the text.
                self.stdout.write(str(data.get("text/plain", "")) + "\n")
            else:
                self.channel.send({"type": "display_data", "id": self.cell_id, "data": data})

    # ---- end of a cell

    def flush_figures(self):
        """Sends every open pyplot figure as PNG, then closes them all."""
        plt = sys.modules.get("matplotlib.pyplot")
        nums = plt.get_fignums() if plt is not None else None
        if not nums:
            return      # close("all") runs gc.collect(): not for every cell
        try:
            if self.cell_id is None:      # plt.show() in a thread between cells
                return
            gcf = sys.modules["matplotlib._pylab_helpers"].Gcf
            for num in nums:
                manager = gcf.get_fig_manager(num)
                fig = manager.canvas.figure if manager is not None else None
                if fig is None or any(fig is shown for shown in self.shown):
                    continue
                data = {"text/plain": repr(fig), "image/png": _b64(figure_png(fig))}
                _put_chart(data, fig)
                self.channel.send({"type": "display_data", "id": self.cell_id, "data": data})
        finally:
            plt.close("all")

    def end_figures(self, error):
        """Figures the cell left open; a rendering failure becomes the cell's error."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None or not plt.get_fignums():
            return error
        if isinstance(error, KeyboardInterrupt):
            # The supervisor is waiting for done: drop them unrendered.
            plt.close("all")
            return error
        try:
            call_user(self.flush_figures)
        except BaseException as exc:
            return error if error is not None else exc
        return error

    def end_streams(self):
        """Flushes whatever the cell left in stream objects of its own, then
        puts the kernel's streams and SIGINT handler back for the next cell."""
        for stream in (sys.stdout, sys.stderr):
            if stream is not self.stdout and stream is not self.stderr:
                try:
                    stream.flush()
                except Exception:
                    pass
        self.restore_stdio()
        # _signal.getsignal: signal.getsignal wraps the answer in an enum, 4 us.
        if _signal.getsignal(signal.SIGINT) is not _on_sigint:
            signal.signal(signal.SIGINT, _on_sigint)

    def restore_stdio(self):
        if self.stdout.closed:
            self.stdout = open_stdio(1)
        if self.stderr.closed:
            self.stderr = open_stdio(2)
        if getattr(self.stdin, "closed", False):    # exit() closes stdin
            self.stdin = io.StringIO()
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr
        sys.stdin = self.stdin

    # ---- snapshots (warden_snapshot.py)

    def snapshot_request(self, verb, request_id, body):
        """Answers a snapshot or restore frame with one message; a failure is
        reported in it ("error"), never raised."""
        kind = "snapshot" if verb == b"snapshot" else "restored"
        try:
            request = json.loads(body)
            snapshots = load_snapshots()
            if verb == b"snapshot":
                reply = self.take_snapshot(snapshots, request)
            else:
                reply = {"failed": snapshots.restore(self, request["archive"], request.get("workspace"))}
        except BaseException as exc:      # a user __setstate__ may raise anything
            reply = {"error": "%s: %s" % (type(exc).__name__, cap_text(str(exc)))}
        self.end_streams()
        self.channel.send({"type": kind, "id": request_id, "execution_count": self.count, **reply})

    def take_snapshot(self, snapshots, request):
        """The snapshot frame's reply. The state is packed by a child of this
        process (fork): packing can take as much memory again as the state
        holds - the pickle, and the archive in /tmp, which is memory too - and
        at the session's memory limit the OOM killer must take the packer, not
        this kernel with the session's state. The child makes itself the OOM
        killer's first choice and this process its last for the while
        (oom_score_adj: a sandbox's program starts at 1000 and may go down to
        0, never below). Without a process to spare (the pids limit), the
        state is packed here, as before."""
        archive, workspace = request["archive"], request.get("workspace")
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return {"uncaptured": snapshots.take(self, archive, workspace)}
        if pid == 0:
            os.close(read_end)
            try:
                _set_oom_score(1000)
                reply = {"uncaptured": snapshots.take(self, archive, workspace)}
            except BaseException as exc:
                reply = {"error": "%s: %s" % (type(exc).__name__, cap_text(str(exc)))}
            try:
                data = json.dumps(reply).encode()
                while data:
                    data = data[os.write(write_end, data):]
            finally:
                os._exit(0)     # no cleanup of the parent's: its buffers, its atexit
        os.close(write_end)
        before = _oom_score()
        _set_oom_score(0)
        try:
            chunks = []
            while True:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(read_end)
            _set_oom_score(before)
        if os.WIFSIGNALED(status) or not chunks:
            try:
                os.unlink(archive)      # what it wrote is the session's memory too
            except OSError:
                pass
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
            return {"error": "the snapshot's packer was killed (signal %d) before it finished: most likely "
                             "packing the state ran out of the session's memory" % sig,
                    "packer_killed": True}
        return json.loads(b"".join(chunks))

    def report_error(self, cell_id, exc):
        try:
            message = error_message(exc, self.kernel_files)
        except Exception as failure:      # never lose the done frame over this
            message = {"ename": type(exc).__name__, "evalue": "",
                       "traceback": ["(warden: formatting the error failed: %r)" % failure]}
        # As the interactive interpreter does, for pdb.pm() and traceback.print_last().
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
        self.channel.send({"type": "error", "id": cell_id, **message})


def display(*objs, raw=False, **ignored):
    """Shows objects as rich output (display_data), like IPython's display().

    Each object becomes one MIME bundle: text/plain plus text/html,
    image/png, ... where the object offers _repr_html_(), _repr_png_(), ...
    With raw=True the objects are MIME bundles (dicts) already. IPython's
    other keyword arguments (metadata, display_id, ...) are accepted and ignored.
    """
    KERNEL.display(objs, raw=raw)


_BUILTIN_PRINT = builtins.print


def _print(*args, sep=" ", end="\n", file=None, flush=False):
    """print(*objects, sep=' ', end='\\n', file=None, flush=False)

    Python's print, except that a line printed to the cell's own stdout or
    stderr is written in one piece, so a reader of the stream (a client
    counting output chunks, as E2B's SDK tests do) gets "hello\\n" as one
    chunk rather than "hello" and "\\n"."""
    target = sys.stdout if file is None else file
    if target is not None and (target is KERNEL.stdout or target is KERNEL.stderr) \
            and (sep is None or isinstance(sep, str)) and (end is None or isinstance(end, str)):
        target.write((" " if sep is None else sep).join(map(str, args)) + ("\n" if end is None else end))
        if flush:
            target.flush()
        return
    _BUILTIN_PRINT(*args, sep=sep, end=end, file=file, flush=flush)


_print.__name__ = _print.__qualname__ = "print"


def _defines_code(code):
    """Does the cell's code make functions, classes, lambdas or generators,
    which outlive it and carry its file name?"""
    return code is not None and any(isinstance(c, types.CodeType) for c in code.co_consts)


def _dedent(source):
    """The cell without the indentation of its first non-blank line, taken
    from every line that starts with it; None if that line is not indented."""
    lines = source.split("\n")
    first = next((line for line in lines if line.strip()), "")
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return None
    return "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines)


def _ends_with_semicolon(lines, node):
    """Jupyter's rule: `expr;` at the end of a cell shows no result."""
    tail = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:]
    return tail.lstrip().startswith(b";")


# --------------------------------------------------------------------------
# IPython's line syntax and pip


def magics_file(kernel_file):
    return os.path.join(os.path.dirname(kernel_file), "warden_magics.py")


def load_magics():
    """warden_magics.py from beside this file, loaded on first use (a cell
    with `!cmd` or `%pip`): most sessions never pay for it."""
    module = sys.modules.get("_warden_magics")
    if module is None:
        path = magics_file(KERNEL.kernel_file)
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
        module = types.ModuleType("_warden_magics")
        module.__file__ = path
        exec(code, module.__dict__)
        module.install(refresh_imports)
        sys.modules["_warden_magics"] = module
    return module


def load_snapshots(source=None, path=None):
    """warden_snapshot.py from beside this file, loaded on the first snapshot
    or restore, as the magics are. The Python zygote loads it ahead, so that
    a fork or a wake does not compile it: it reads it at `source` (on the
    host) and names it `path` (where sandboxes see it)."""
    return load_sibling("warden_snapshot", source, path)


def load_sibling(name, source=None, path=None):
    """The kernel's module `name`.py from beside this file, as the module
    _`name`, loaded once on first use (warden_charts.py: the first figure)."""
    module = sys.modules.get("_" + name)
    if module is None:
        path = path or os.path.join(os.path.dirname(KERNEL.kernel_file), name + ".py")
        with open(source or path, "rb") as f:
            code = compile(f.read(), path, "exec")
        module = types.ModuleType("_" + name)
        module.__file__ = path
        sys.modules["_" + name] = module
        try:
            exec(code, module.__dict__)
        except BaseException:
            del sys.modules["_" + name]
            raise
    return module


def user_site():
    """Where pip installs inside a sandbox: the user site in the workspace
    ($PYTHONUSERBASE, set by Warden), as site.getusersitepackages() says."""
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
    return os.path.join(base, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


_PTH_SEEN = set()


def refresh_imports():
    """Keeps the user site on sys.path, ahead of the system's packages as
    site.py puts it (also before it exists: a later pip install creates
    it), and makes what was installed there since importable: its .pth
    files run, and its directory is looked at afresh. The kernel runs it at
    start-up and after every `!cmd` and `%pip`."""
    site_dir = user_site()
    if site_dir not in sys.path:
        at = next((i for i, p in enumerate(sys.path) if p.endswith(("-packages", "-packages/"))), len(sys.path))
        sys.path.insert(at, site_dir)
    # Only this directory's finder: invalidating every cache would make a
    # zygote's clone list the system's package directories again.
    sys.path_importer_cache.pop(site_dir, None)
    try:
        pth_files = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth") and n not in _PTH_SEEN)
    except OSError:
        return
    if pth_files:
        import site
        for name in pth_files:
            _PTH_SEEN.add(name)
            site.addpackage(site_dir, name, None)


# --------------------------------------------------------------------------
# Start-up


# What a first cell typically does with a warm module, done once before
# ready: it triggers the module's lazy imports and builds its caches. A
# kernel cloned from the zygote inherits that work (EXERCISED) instead of
# repeating it: doing it again in every clone would copy the pages it
# touches into each session (4x the idle memory, measured).
WARM_UP = {
    "numpy": "m.arange(6).reshape(2, 3).sum(axis=0).tolist(); repr(m.linspace(0, 1, 3))",
    "pandas": ("d = m.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']}); repr(d); "
               "d.describe(); d.groupby('b').a.sum(); d.a.sum(); repr(d.a)"),
}


def warm_imports(spec):
    """Imports modules into sys.modules (not the user namespace) before
    ready, and exercises the ones WARM_UP knows."""
    warm, errors = [], {}
    for name in (part.strip() for part in spec.split(",")):
        if not name:
            continue
        try:
            module = __import__(name)
            warm.append(name)
        except BaseException as exc:       # a module calling sys.exit() included
            errors[name] = "%s: %s" % (type(exc).__name__, exc)
            continue
        if name in WARM_UP and name not in EXERCISED:
            EXERCISED.add(name)
            try:
                exec(WARM_UP[name], {"m": module})
            except Exception:              # never fail start-up over a warm-up
                pass
    return warm, errors


EXERCISED = set()   # modules this process (or the zygote before it) warmed up


def main():
    global KERNEL
    fd = int(os.environ.get("WARDEN_CHANNEL_FD", "3"))
    # Subprocesses (os.system, fork+exec) must not inherit the channel: they
    # could write to it and would keep it open after the kernel dies.
    os.set_inheritable(fd, False)
    signal.signal(signal.SIGINT, _on_sigint)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.register_at_fork(after_in_child=_after_fork_in_child)
    # Import like interactive Python: the user's modules from cwd, and not
    # the files next to the kernel.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    sys.path.insert(0, "")
    refresh_imports()
    sys.argv = [""]
    install_import_patches()
    builtins.display = display
    builtins.print = _print

    channel = Channel(fd)
    KERNEL = Kernel(channel)
    # A crash in native code still leaves a Python traceback on stderr.
    faulthandler.enable(file=KERNEL.stderr)
    warm, warm_errors = warm_imports(os.environ.get("WARDEN_WARM", ""))
    KERNEL.restore_stdio()                 # a warm import may have swapped them
    version = "%d.%d.%d" % sys.version_info[:3]
    channel.send({"type": "ready", "language": "python", "version": version,
                  "warm": warm, "warm_errors": warm_errors})
    cell_env = CellEnvironment()
    while True:
        try:
            request = channel.read_request()
        except ProtocolError as exc:
            KERNEL.stderr.write("warden kernel: %s\n" % exc)
            return 2
        if request is None:
            return 0
        verb, request_id, body = request
        if cell_env.take(verb, request_id, body):
            continue
        if verb == b"execute":
            with cell_env.around(request_id):
                KERNEL.run_cell(request_id, body)
        else:
            KERNEL.snapshot_request(verb, request_id, body)


KERNEL = None

if __name__ == "__main__":
    sys.exit(main())
