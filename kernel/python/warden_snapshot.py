"""Session snapshots for Warden's Python kernel (docs/kernel-protocol.md).

`take` packs the user's namespace (variables, functions, classes, instances,
imported modules by name, the execution count) and the workspace's files
into one tar archive; `restore` unpacks such an archive into a fresh kernel.
The namespace is serialised with dill (Debian's python3-dill), which pickles
what plain pickle cannot: functions, lambdas and classes defined in cells.

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
import stat
import sys
import tarfile
import types

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


def _dill():
    import dill
    # dill remembers the __main__ it saw when it was imported; the kernel
    # made its own __main__ (Kernel._make_namespace) before any cell ran.
    dill._dill._main_module = sys.modules["__main__"]
    return dill


def _dumps(dill, value):
    class Pickler(dill.Pickler):
        def save(self, obj, save_persistent_id=True):
            reason = uncapturable(obj)
            if reason is not None:
                raise Uncapturable(reason)
            super().save(obj, save_persistent_id)

    buf = io.BytesIO()
    Pickler(buf, protocol=dill.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


def _why(exc):
    if isinstance(exc, Uncapturable):
        return "holds %s" % exc
    return "cannot be serialised: %s: %s" % (type(exc).__name__, exc)


def capture_namespace(namespace):
    """(pickled variables, {name: module name}, {name: why it was left out})."""
    dill = _dill()
    modules, values, left_out = {}, {}, {}
    for name, value in list(namespace.items()):
        if name in MODULE_NAMES:
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        else:
            values[name] = value
    try:
        return _dumps(dill, values), modules, left_out   # one pickle: shared objects stay shared
    except Exception:
        pass
    for name in list(values):
        try:
            _dumps(dill, values[name])
        except Exception as exc:
            left_out[name] = _why(exc)
            del values[name]
    return _dumps(dill, values), modules, left_out


def _add_workspace(archive, workspace, left_out):
    for top, dirs, files in os.walk(workspace):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, workspace)
            st = os.lstat(path)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                left_out[path] = "not a regular file, directory or symlink"
                continue
            archive.add(path, arcname="workspace/" + rel, recursive=False)


def take(kernel, archive_path, workspace):
    """Writes the archive; returns {name: why} for what was left out."""
    blob, modules, left_out = capture_namespace(kernel.namespace)
    fd = os.open(archive_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as archive:
        meta = json.dumps({"execution_count": kernel.count, "modules": modules,
                           "python": "%d.%d" % sys.version_info[:2]}).encode()
        for name, data in (("snapshot.json", meta), ("namespace.dill", blob)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600
            archive.addfile(info, io.BytesIO(data))
        if workspace and os.path.isdir(workspace):
            _add_workspace(archive, workspace, left_out)
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


def restore(kernel, archive_path, workspace):
    """Loads the archive into this kernel; returns {name: why} for what failed."""
    failed = {}
    with tarfile.open(archive_path, mode="r:") as archive:
        meta = json.loads(archive.extractfile("snapshot.json").read())
        blob = archive.extractfile("namespace.dill").read()
        if workspace:
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
    os.unlink(archive_path)
    for name, module in meta.get("modules", {}).items():
        try:
            kernel.namespace[name] = importlib.import_module(module)
        except Exception as exc:
            failed[name] = "import %s failed: %s: %s" % (module, type(exc).__name__, exc)
    dill = _dill()
    kernel.namespace.update(dill.loads(blob))
    kernel.count = int(meta.get("execution_count", 0))
    return failed
