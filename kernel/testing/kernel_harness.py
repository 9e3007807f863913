"""Drives a Warden kernel over the kernel protocol (docs/kernel-protocol.md),
outside any sandbox, for the kernels' own protocol tests.

    with KernelProcess(["/usr/bin/python3", "kernel/python/warden_kernel.py"]) as k:
        cell = k.execute("1 + 1")
        assert cell.result["data"]["text/plain"] == "2"
"""

import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import termios
import threading
import time
import unittest


class GateOpener:
    """An on_chunk callback that creates gate files in the kernel's working
    directory once the output seen so far contains what each gate waits for.

    Streaming tests use it instead of timing: the cell prints, then waits for
    its gate before going on, so a kernel that held output back until the
    cell ended would never see the gate open, and the cell says so.

        opener = GateOpener(workdir, [("gate", [("stdout", b"early")])])
        cell = k.execute(code, on_chunk=opener)
    """

    def __init__(self, directory, gates):
        self._directory = directory
        self._pending = list(gates)  # [(file name, [(stream, needle), ...]), ...]
        self._seen = {"stdout": b"", "stderr": b""}

    def __call__(self, name, data):
        self._seen[name] += data
        while self._pending and all(needle in self._seen[stream]
                                    for stream, needle in self._pending[0][1]):
            gate, _ = self._pending.pop(0)
            with open(os.path.join(self._directory, gate), "w"):
                pass


class Cell:
    """What one cell produced: frames in order, and raw stdout/stderr."""

    def __init__(self):
        self.frames = []
        # bytearrays: appending chunk after chunk to bytes is quadratic.
        self._streams = {"stdout": bytearray(), "stderr": bytearray()}
        # (seconds since execute, stream, bytes) per chunk, to test streaming.
        self.chunks = []
        # seconds since execute at which each frame arrived (parallel to frames).
        self.frame_times = []

    @property
    def stdout(self):
        return bytes(self._streams["stdout"])

    @stdout.setter
    def stdout(self, value):
        self._streams["stdout"] = bytearray(value)

    @property
    def stderr(self):
        return bytes(self._streams["stderr"])

    @stderr.setter
    def stderr(self, value):
        self._streams["stderr"] = bytearray(value)

    @property
    def done(self):
        return next((f for f in self.frames if f["type"] == "done"), None)

    @property
    def result(self):
        return next((f for f in self.frames if f["type"] == "execute_result"), None)

    @property
    def error(self):
        return next((f for f in self.frames if f["type"] == "error"), None)

    @property
    def displays(self):
        return [f for f in self.frames if f["type"] == "display_data"]


class KernelProcess:
    def __init__(self, argv, env=None, cwd=None, ready_timeout=30):
        self.parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        full_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
                    "WARDEN_CHANNEL_FD": "3", "HOME": cwd or "/tmp"}
        full_env.update(env or {})
        child_fd = child.fileno()

        def setup():
            # dup2 leaves fd 3 inheritable. close_fds must stay off: it runs
            # after preexec_fn and would close fd 3 again (pass_fds=(child_fd,)
            # kept child_fd, not 3, so the kernel started without a channel).
            if child_fd == 3:
                os.set_inheritable(3, True)
            else:
                os.dup2(child_fd, 3)
            # fds inherited from whoever ran the tests must not leak either:
            # mark them close-on-exec (closing them here would also close
            # subprocess's own error pipe).
            for name in os.listdir("/proc/self/fd"):
                if int(name) > 3:
                    try:
                        os.set_inheritable(int(name), False)
                    except OSError:
                        pass
            os.setsid()  # its own process group, as in the sandbox

        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=full_env, cwd=cwd, preexec_fn=setup, close_fds=False)
        child.close()
        self._buf = bytearray()   # appended in place: large frames stay linear
        self._next_id = 1
        self.ready = self._read_frame(ready_timeout)
        assert self.ready is not None and self.ready["type"] == "ready", self.ready

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.parent.close()

    def interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait_unread(self, at_least, timeout=30):
        """Waits until at least `at_least` bytes the kernel wrote sit unread
        in the channel (FIONREAD): proof that it is inside a write we have
        not drained, whatever the machine's load."""
        deadline = time.monotonic() + timeout
        while True:
            raw = fcntl.ioctl(self.parent.fileno(), termios.FIONREAD, b"\0\0\0\0")
            unread = struct.unpack("i", raw)[0]
            if unread >= at_least:
                return unread
            if time.monotonic() > deadline:
                raise TimeoutError("only %d unread bytes after %ss" % (unread, timeout))
            time.sleep(0.005)

    def send_execute(self, code, split=None, between=None, env=None):
        """Sends one execute frame. With split, the frame goes out in two
        writes, the first of split bytes, and between() is called in between
        (to test a kernel against a frame that arrives in pieces). With env
        (a dict), an env frame for the cell goes first."""
        cell_id = self._next_id
        self._next_id += 1
        data = code.encode()
        frame = b"execute %d %d\n" % (cell_id, len(data)) + data
        if env:
            entries = b"".join(b"%d:%s" % (len(kv), kv)
                               for kv in (("%s=%s" % item).encode() for item in env.items()))
            frame = b"env %d %d\n" % (cell_id, len(entries)) + entries + frame
        if split is None:
            self.parent.sendall(frame)
        else:
            self.parent.sendall(frame[:split])
            if between is not None:
                between()
            self.parent.sendall(frame[split:])
        return cell_id

    def request(self, verb, body, timeout=60):
        """Sends a snapshot or restore frame (body: a dict, sent as JSON)
        and returns the kernel's one answer."""
        request_id = self._next_id
        self._next_id += 1
        data = json.dumps(body).encode()
        self.parent.sendall(b"%s %d %d\n" % (verb.encode(), request_id, len(data)) + data)
        frame = self._read_frame(timeout)
        assert frame is not None and frame.get("id") == request_id, frame
        return frame

    def execute(self, code, timeout=30, on_chunk=None, env=None):
        """Runs one cell (with `env`, its own environment variables) and
        collects everything until its done frame."""
        start = time.monotonic()
        cell_id = self.send_execute(code, env=env)
        return self.collect(cell_id, timeout=timeout, on_chunk=on_chunk, start=start)

    def collect(self, cell_id, timeout=30, on_chunk=None, start=None):
        """Collects frames and output of an already sent cell until its done
        frame. Times in the Cell are relative to start (default: now)."""
        if start is None:
            start = time.monotonic()
        cell = Cell()
        deadline = start + timeout
        streams = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}
        while cell.done is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no done frame within %ss; got %r" % (timeout, cell.frames))
            fds = list(streams) + [self.parent.fileno()]
            readable, _, _ = select.select(fds, [], [], remaining)
            for fd in readable:
                if fd == self.parent.fileno():
                    chunk = self.parent.recv(1 << 20)
                    if not chunk:
                        raise EOFError("kernel closed the channel; frames %r" % cell.frames)
                    self._buf += chunk
                    while True:
                        frame = self._parse_frame()
                        if frame is None:
                            break
                        assert frame.get("id") == cell_id, frame
                        cell.frames.append(frame)
                        cell.frame_times.append(time.monotonic() - start)
                else:
                    data = os.read(fd, 1 << 16)
                    if data:
                        self._record(cell, streams[fd], data, start, on_chunk)
        # Everything the cell wrote before done is already in the pipes.
        for fd, name in streams.items():
            while select.select([fd], [], [], 0)[0]:
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                self._record(cell, name, data, start, on_chunk)
        return cell

    @staticmethod
    def _record(cell, name, data, start, on_chunk):
        cell._streams[name] += data
        cell.chunks.append((time.monotonic() - start, name, data))
        if on_chunk:
            on_chunk(name, data)

    def _parse_frame(self):
        newline = self._buf.find(b"\n")
        if newline < 0:
            return None
        size = int(self._buf[:newline])
        if len(self._buf) < newline + 1 + size:
            return None
        body = bytes(self._buf[newline + 1:newline + 1 + size])
        del self._buf[:newline + 1 + size]
        return json.loads(body)

    def _read_frame(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            frame = self._parse_frame()
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.parent], [], [], remaining)[0]:
                return None
            chunk = self.parent.recv(1 << 20)
            if not chunk:
                return None
            self._buf += chunk


class SharedKernelTestCase(unittest.TestCase):
    """A unittest base for a kernel's protocol tests: one kernel (started
    with the class's ARGV) for the whole class unless fresh_kernel_per_test;
    a test that kills or wedges it makes the next test start a new one.
    Tests use their own names, so shared state is harmless."""

    ARGV = None  # set by the subclass: how the supervisor starts the kernel
    fresh_kernel_per_test = False
    kernel_broken = False

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.TemporaryDirectory()
        if not cls.fresh_kernel_per_test:
            cls.kernel = KernelProcess(cls.ARGV, cwd=cls.workdir.name)

    @classmethod
    def tearDownClass(cls):
        if not cls.fresh_kernel_per_test:
            cls.kernel.close()
        cls.workdir.cleanup()

    def setUp(self):
        if self.fresh_kernel_per_test:
            self.kernel = KernelProcess(self.ARGV, cwd=self.workdir.name)
            self.addCleanup(self.kernel.close)
        elif self.kernel.proc.poll() is not None or self.kernel_broken:
            type(self).kernel.close()
            type(self).kernel = KernelProcess(self.ARGV, cwd=self.workdir.name)
            type(self).kernel_broken = False

    CELL_TIMEOUT = 10  # seconds a cell may take; kernels that compile cells allow more

    def run_cell(self, code, **kwargs):
        try:
            return self.kernel.execute(code, timeout=kwargs.pop("timeout", self.CELL_TIMEOUT), **kwargs)
        except (TimeoutError, EOFError):
            type(self).kernel_broken = True
            raise

    def ok(self, code, **kwargs):
        """Runs a cell that must succeed."""
        cell = self.run_cell(code, **kwargs)
        self.assertEqual(cell.done["status"], "ok", (code, cell.frames, cell.stderr))
        return cell

    def text(self, code, **kwargs):
        """text/plain of a cell's result, after checking it succeeded."""
        cell = self.ok(code, **kwargs)
        self.assertIsNotNone(cell.result, (code, cell.frames))
        return cell.result["data"]["text/plain"]

    def interrupt_after(self, seconds):
        """SIGINT to the kernel's process group `seconds` from now."""
        timer = threading.Timer(seconds, self.kernel.interrupt)
        timer.start()
        self.addCleanup(timer.cancel)
