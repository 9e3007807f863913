"""Session snapshots for Warden's Python kernel (docs/kernel-protocol.md).

`take` packs the user's namespace (variables, functions, classes, instances,
imported modules by name, the execution count) and the workspace's files
into one archive; `restore` unpacks such an archive into a fresh kernel.

The namespace is pickled with protocol 5, large buffers (numpy arrays, and
so pandas frames) out of band: they go from the array's memory straight to
the archive and back into the new array, with no copy in between. The C
pickler does it when it can; a namespace holding what only dill (Debian's
python3-dill) pickles - functions, lambdas and classes defined in cells,
and what refers to them - goes through dill's pure-Python pickler instead.

The archive (FORMAT, written once, read once): MAGIC, an 8-byte length, a
JSON header (execution count, modules, which pickler, the sizes that
follow), the pickle stream, the out-of-band buffers back to back, and an
uncompressed tar of the workspace (left out when it is empty). Archives
of the older form (one tar) are still restored.

This runs inside the sandbox only. The supervisor keeps the archive as
opaque bytes and hands it to another sandbox; nothing on the host ever
unpickles it (docs/security.md).

What cannot be carried over to another process - an open file, a socket, a
thread, a generator half-way, a child process - is never dropped silently:
`take` names every variable holding one (even deep inside a container),
with the reason, and leaves it out. Loaded on first use, like the magics.
"""

import importlib
import io
import json
import os
import pickle
import stat
import struct
import sys
import types

MAGIC = b"WARDEN-SNAPSHOT2"    # 16 bytes; an old archive starts with a tar header

# Names every __main__ has, which a fresh kernel makes itself.
MODULE_NAMES = {"__builtins__", "__name__", "__doc__", "__package__", "__loader__", "__spec__"}
IN_MEMORY_FILES = (io.BytesIO, io.StringIO)


class Uncapturable(Exception):
    """An object that only makes sense in this process."""


def uncapturable(obj):
    """Why `obj` cannot be carried to another process, or None."""
    if isinstance(obj, types.GeneratorType):
        return "a generator (it cannot be resumed elsewhere)"
    if isinstance(obj, (types.CoroutineType, types.AsyncGeneratorType)):
        return "a coroutine or async generator (it cannot be resumed elsewhere)"
    if isinstance(obj, io.IOBase) and not isinstance(obj, IN_MEMORY_FILES):
        return "an open file or stream"
    for module, name, reason in (("socket", "socket", "an open socket"),
                                 ("threading", "Thread", "a thread"),
                                 ("subprocess", "Popen", "a child process"),
                                 ("mmap", "mmap", "a memory map"),
                                 ("multiprocessing.pool", "Pool", "a process pool"),
                                 ("concurrent.futures", "Executor", "a thread or process pool"),
                                 ("asyncio", "AbstractEventLoop", "an event loop"),
                                 ("selectors", "BaseSelector", "a selector")):
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(obj, cls):
            return reason
    return None


class _NeedsDill(Exception):
    """Plain pickle would store it by a name the new kernel does not have yet."""


def _defined_in_cells(obj):
    """A function or class made by a cell, or an instance of such a class:
    plain pickle stores these by name (`__main__.f`), which only exists in
    the new kernel once the namespace holding it has been restored."""
    if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
        return True
    return getattr(type(obj), "__module__", None) == "__main__"


class _Pickler(pickle.Pickler):
    """The C pickler, stopping at what it cannot carry or would carry wrong.
    reducer_override sees every object but the plain ones (None, bools,
    numbers, str, bytes, and exact lists, tuples, dicts and sets), which
    can be neither."""

    def reducer_override(self, obj):
        reason = uncapturable(obj)
        if reason is not None:
            raise Uncapturable(reason)
        if _defined_in_cells(obj):
            raise _NeedsDill()
        return NotImplemented


def _dill():
    import dill
    # dill remembers the __main__ it saw when it was imported; the kernel
    # made its own __main__ (Kernel._make_namespace) before any cell ran.
    dill._dill._main_module = sys.modules["__main__"]
    return dill


def _dumps_dill(dill, value, buffer_callback):
    ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)

    class Pickler(dill.Pickler):
        def save(self, obj, save_persistent_id=True):
            reason = uncapturable(obj)
            if reason is not None:
                raise Uncapturable(reason)
            super().save(obj, save_persistent_id)

        def reducer_override(self, obj):
            # dill reduces numpy arrays itself, their data in the stream;
            # numpy's own protocol-5 reduction hands it out of band.
            if ndarray is not None and type(obj) is ndarray:
                return obj.__reduce_ex__(5)
            return NotImplemented

    buf = io.BytesIO()
    Pickler(buf, protocol=5, buffer_callback=buffer_callback).dump(value)
    return buf.getvalue()


def _discard(buffer):
    """A buffer_callback that keeps a trial dump from copying any buffer."""
    return None


def _why(exc):
    if isinstance(exc, Uncapturable):
        return "holds %s" % exc
    return "cannot be serialised: %s: %s" % (type(exc).__name__, exc)


def capture_namespace(namespace):
    """(pickle stream, out-of-band buffers, pickler, {name: module name},
    {name: why it was left out}). The buffers are PickleBuffers over the
    objects' own memory. One pickle for all variables: shared objects stay
    shared."""
    modules, values, left_out = {}, {}, {}
    for name, value in list(namespace.items()):
        if name in MODULE_NAMES:
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        else:
            values[name] = value
    buffers = []
    try:
        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=buffers.append).dump(values)
        return f.getvalue(), buffers, "pickle", modules, left_out
    except Exception:
        pass   # something only dill pickles, or cannot be carried at all: dill decides, by name
    dill = _dill()
    buffers = []
    try:
        return _dumps_dill(dill, values, buffers.append), buffers, "dill", modules, left_out
    except Exception:
        pass
    for name in list(values):
        try:
            _dumps_dill(dill, values[name], _discard)
        except Exception as exc:
            left_out[name] = _why(exc)
            del values[name]
    buffers = []
    return _dumps_dill(dill, values, buffers.append), buffers, "dill", modules, left_out


def _workspace_members(workspace, left_out):
    """[(path, name in the archive)] of the workspace, parents first."""
    members = []
    for top, dirs, files in os.walk(workspace):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, workspace)
            st = os.lstat(path)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                left_out[path] = "not a regular file, directory or symlink"
                continue
            members.append((path, "workspace/" + rel))
    return members


def take(kernel, archive_path, workspace):
    """Writes the archive; returns {name: why} for what was left out."""
    stream, buffers, pickler, modules, left_out = capture_namespace(kernel.namespace)
    views = [buffer.raw() for buffer in buffers]   # contiguous bytes, no copy
    members = _workspace_members(workspace, left_out) if workspace and os.path.isdir(workspace) else []
    header = json.dumps({"execution_count": kernel.count, "modules": modules,
                         "python": "%d.%d" % sys.version_info[:2], "pickler": pickler,
                         "pickle_bytes": len(stream), "buffers": [view.nbytes for view in views]}).encode()
    fd = os.open(archive_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        f.write(stream)
        for view in views:
            f.write(view)        # large writes go straight from the array to the file
        if members:
            import tarfile
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as archive:
                for path, arcname in members:
                    archive.add(path, arcname=arcname, recursive=False)
    return left_out


def _safe_members(archive):
    for member in archive.getmembers():
        name = member.name
        parts = name.split("/")
        if not name.startswith("workspace/") or name.startswith("/") or ".." in parts:
            continue
        if member.islnk() and (not member.linkname.startswith("workspace/") or ".." in member.linkname.split("/")):
            continue
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            continue
        yield member


def _extract_workspace(archive, workspace, failed):
    base = os.path.dirname(os.path.abspath(workspace))
    for member in _safe_members(archive):
        # Inside the sandbox only: "workspace/x" lands at <workspace>/x.
        member.name = os.path.join(os.path.basename(workspace), member.name[len("workspace/"):])
        if member.islnk():
            member.linkname = os.path.join(os.path.basename(workspace),
                                           member.linkname[len("workspace/"):])
        try:
            archive.extract(member, path=base, set_attrs=not member.issym())
        except OSError as exc:
            failed["/" + member.name] = "%s: %s" % (type(exc).__name__, exc)


def _read_exactly(f, n):
    data = f.read(n)
    if len(data) != n:
        raise ValueError("the snapshot archive is truncated")
    return data


def _new_buffer(n):
    """Writable memory for one out-of-band buffer. numpy's allocator (when
    numpy is loaded, as it is whenever arrays were pickled) asks for huge
    pages for large blocks, which makes first touching them far cheaper."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and n >= 1 << 20:
        return numpy.empty(n, dtype=numpy.uint8)
    return bytearray(n)


def _read_archive(f, workspace, failed):
    """(header, pickle stream, buffers) of an archive in FORMAT; extracts
    its workspace. `f` is unbuffered, so buffers are read straight into."""
    size = os.fstat(f.fileno()).st_size
    (length,) = struct.unpack("<Q", _read_exactly(f, 8))
    if length > size:
        raise ValueError("the snapshot archive is truncated")
    meta = json.loads(_read_exactly(f, length))
    sizes = [int(n) for n in meta.get("buffers", [])]
    stream_bytes = int(meta["pickle_bytes"])
    if min(sizes + [stream_bytes, 0]) < 0 or f.tell() + stream_bytes + sum(sizes) > size:
        raise ValueError("the snapshot archive is truncated")
    stream = _read_exactly(f, stream_bytes)
    buffers = []
    for n in sizes:
        buffer = _new_buffer(n)
        view, done = memoryview(buffer).cast("B"), 0
        while done < n:
            got = f.readinto(view[done:])
            if not got:
                raise ValueError("the snapshot archive is truncated")
            done += got
        buffers.append(buffer)
    if workspace and f.tell() < size:
        import tarfile
        with tarfile.open(fileobj=f, mode="r:") as archive:
            _extract_workspace(archive, workspace, failed)
    return meta, stream, buffers


def _read_tar_archive(f, workspace, failed):
    """The same from an archive of the older form: one tar, dill in-band."""
    import tarfile
    with tarfile.open(fileobj=f, mode="r:") as archive:
        meta = json.loads(archive.extractfile("snapshot.json").read())
        stream = archive.extractfile("namespace.dill").read()
        if workspace:
            _extract_workspace(archive, workspace, failed)
    meta["pickler"] = "dill"
    return meta, stream, None


def restore(kernel, archive_path, workspace):
    """Loads the archive into this kernel; returns {name: why} for what failed."""
    failed = {}
    with open(archive_path, "rb", buffering=0) as f:
        if f.read(len(MAGIC)) == MAGIC:
            meta, stream, buffers = _read_archive(f, workspace, failed)
        else:
            f.seek(0)
            meta, stream, buffers = _read_tar_archive(f, workspace, failed)
    os.unlink(archive_path)
    for name, module in meta.get("modules", {}).items():
        try:
            kernel.namespace[name] = importlib.import_module(module)
        except Exception as exc:
            failed[name] = "import %s failed: %s: %s" % (module, type(exc).__name__, exc)
    if meta.get("pickler") == "pickle":
        values = pickle.loads(stream, buffers=buffers)
    elif buffers is None:
        values = _dill().loads(stream)
    else:
        values = _dill().loads(stream, buffers=buffers)
    kernel.namespace.update(values)
    kernel.count = int(meta.get("execution_count", 0))
    return failed
