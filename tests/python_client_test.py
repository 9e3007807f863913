"""The Python client, as a user would make it, against a real wardend.

Generates warden/v1/executor_pb2.py and executor_pb2_grpc.py from
proto/warden/v1/executor.proto with Debian's python3-grpc-tools (its protoc
is 3.5.1; the runtime is python3-grpcio 1.51 and python3-protobuf 3.21),
starts $WARDEN_BIN_DIR/wardend on a UNIX socket in a temporary directory,
and drives every kind of call through the generated stubs: unary, server
streaming, client streaming, and a gRPC error. Needs root (wardend builds
sandboxes). Run it from the repository root:

    WARDEN_BIN_DIR=build/bin /usr/bin/python3 -m unittest -v tests/python_client_test.py
"""

import hashlib
import importlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

REPO = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "proto"
PROTO = PROTO_ROOT / "warden" / "v1" / "executor.proto"

STARTUP_TIMEOUT_S = 60    # the socket appears once the sandbox layer is up
RPC_TIMEOUT_S = 60        # every call; a hang fails the test instead of ctest's timeout
SHUTDOWN_TIMEOUT_S = 15   # SIGTERM to exit with nothing running


def generate_client(out_dir):
    """Runs grpc_tools' protoc over executor.proto into out_dir and imports
    the result; returns (executor_pb2, executor_pb2_grpc)."""
    try:
        import grpc_tools.protoc  # noqa: F401 (only checks it is installed)
    except ImportError:
        raise AssertionError("grpc_tools is missing: apt-get install python3-grpc-tools "
                             "(`make deps` does it)")
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", str(PROTO_ROOT),
         "--python_out", str(out_dir), "--grpc_python_out", str(out_dir), str(PROTO)],
        capture_output=True, text=True)
    if generated.returncode != 0:
        raise AssertionError("grpc_tools.protoc failed:\n" + generated.stderr)
    sys.path.insert(0, str(out_dir))
    return (importlib.import_module("warden.v1.executor_pb2"),
            importlib.import_module("warden.v1.executor_pb2_grpc"))


def log_tail(path, lines=40):
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return "(no log: %s)" % e


class PythonClientTest(unittest.TestCase):
    """One wardend for the whole class; each test uses its own sessions."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="warden-pyclient-")
        cls.daemon = cls.log = None
        try:
            cls.start()
        except BaseException:
            if cls.daemon is not None:
                cls.stop_daemon()
            cls.cleanup()
            raise

    @classmethod
    def start(cls):
        tmp = pathlib.Path(cls.tmp.name)
        cls.pb, cls.pb_grpc = generate_client(tmp / "gen")

        bin_dir = pathlib.Path(os.environ.get("WARDEN_BIN_DIR", REPO / "build" / "bin"))
        wardend = bin_dir / "wardend"
        if not os.access(wardend, os.X_OK):
            raise AssertionError("%s is missing: build it (cmake --build build --target wardend) "
                                 "or point WARDEN_BIN_DIR at its directory" % wardend)

        # Built-in defaults, except a host id range of our own, so that
        # another wardend on this machine (ctest -j, `make run`) never maps
        # its sandboxes to the same host uids.
        config = tmp / "wardend.json"
        config.write_text(json.dumps({"executor": {
            "host_id_base": 6_000_000 + (os.getpid() % 4096) * 1024,
            "host_id_count": 1024}}))
        cls.socket = tmp / "w.sock"
        cls.log_path = tmp / "wardend.log"
        cls.log = open(cls.log_path, "wb")
        cls.daemon = subprocess.Popen(
            [str(wardend), "--config", str(config), "--listen", "unix:%s" % cls.socket],
            stdin=subprocess.DEVNULL, stdout=cls.log, stderr=subprocess.STDOUT)
        cls.channel = cls.wait_for_daemon()
        cls.stub = cls.pb_grpc.ExecutorStub(cls.channel)

    @classmethod
    def wait_for_daemon(cls):
        """Waits for the socket file, then for a connected channel, until one
        deadline; fails at once if wardend exits meanwhile."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not cls.socket.exists():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("wardend did not create %s within %d s:\n%s"
                                     % (cls.socket, STARTUP_TIMEOUT_S, log_tail(cls.log_path)))
            try:
                code = cls.daemon.wait(timeout=min(0.05, remaining))
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError("wardend exited with %d before listening:\n%s"
                                 % (code, log_tail(cls.log_path)))
        # No receive cap, as docs/api.md advises: a response may carry 16 MiB of each stream.
        channel = grpc.insecure_channel("unix:%s" % cls.socket,
                                        options=[("grpc.max_receive_message_length", -1)])
        try:
            grpc.channel_ready_future(channel).result(timeout=max(deadline - time.monotonic(), 0.1))
        except grpc.FutureTimeoutError:
            channel.close()
            raise AssertionError("could not connect to wardend at %s within %d s:\n%s"
                                 % (cls.socket, STARTUP_TIMEOUT_S, log_tail(cls.log_path)))
        return channel

    @classmethod
    def stop_daemon(cls):
        """SIGTERM; returns wardend's exit status, or None if it had to be killed."""
        if cls.daemon.poll() is not None:
            return cls.daemon.returncode
        cls.daemon.send_signal(signal.SIGTERM)
        try:
            return cls.daemon.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            cls.daemon.kill()
            cls.daemon.wait()
            return None

    @classmethod
    def cleanup(cls):
        if cls.log is not None:
            cls.log.close()
        cls.tmp.cleanup()

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        died = cls.daemon.poll()
        code = cls.stop_daemon()
        log = log_tail(cls.log_path)
        cls.cleanup()
        if died is not None:
            raise AssertionError("wardend died during the tests with status %d:\n%s" % (died, log))
        if code is None:
            raise AssertionError("wardend did not exit within %d s of SIGTERM (killed):\n%s"
                                 % (SHUTDOWN_TIMEOUT_S, log))
        if code != 0:
            raise AssertionError("wardend exited with %d after SIGTERM, not 0:\n%s" % (code, log))

    # ---- helpers

    def execute(self, code, **fields):
        return self.stub.Execute(self.pb.ExecuteRequest(code=code, **fields), timeout=RPC_TIMEOUT_S)

    def create_session(self, **fields):
        session = self.stub.CreateSession(
            self.pb.CreateSessionRequest(language=self.pb.LANGUAGE_PYTHON, **fields),
            timeout=RPC_TIMEOUT_S)
        self.addCleanup(self.close_quietly, session.id)
        return session

    def close_quietly(self, session_id):
        try:
            self.stub.CloseSession(self.pb.CloseSessionRequest(session_id=session_id),
                                   timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:  # closed by the test itself
                raise

    def assertOutcome(self, response, outcome):
        self.assertEqual(self.pb.Outcome.Name(response.outcome), self.pb.Outcome.Name(outcome),
                         "message: %r, error: %r, stderr: %r"
                         % (response.message, response.error, response.stderr))

    def assertRpcError(self, code, call, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as raised:
            call(*args, timeout=RPC_TIMEOUT_S, **kwargs)
        self.assertEqual(raised.exception.code(), code, raised.exception.details())
        return raised.exception

    # ---- Execute, one-shot

    def test_execute_returns_stdout_and_the_trailing_expression(self):
        response = self.execute('print("hello from the sandbox")\n6 * 7')
        self.assertOutcome(response, self.pb.OUTCOME_OK)
        self.assertEqual(response.stdout, b"hello from the sandbox\n")
        self.assertEqual(response.stderr, b"")
        self.assertEqual(len(response.results), 1)
        self.assertEqual(response.results[0].data["text/plain"], b"42")
        self.assertFalse(response.HasField("error"))
        self.assertEqual(response.session_id, "")  # one-shot
        self.assertEqual(response.execution_count, 1)
        self.assertEqual(response.exit_code, -1)  # Python has none; bash sets it

    def test_execute_reports_an_exception_as_an_error_outcome(self):
        response = self.execute("def divide(a, b):\n    return a / b\n\ndivide(1, 0)\n")
        self.assertOutcome(response, self.pb.OUTCOME_ERROR)
        self.assertEqual(response.error.name, "ZeroDivisionError")
        self.assertEqual(response.error.value, "division by zero")
        traceback = list(response.error.traceback)
        self.assertTrue(traceback, "an empty traceback")
        self.assertTrue(any("in divide" in line for line in traceback), traceback)
        self.assertIn("ZeroDivisionError: division by zero", traceback[-1])
        self.assertEqual(len(response.results), 0)

    def test_execute_writes_files_into_a_one_shot_workspace(self):
        response = self.execute('open("data/in.txt").read().upper()',
                                files=[self.pb.File(path="data/in.txt", content=b"abc")])
        self.assertOutcome(response, self.pb.OUTCOME_OK)
        self.assertEqual(response.results[0].data["text/plain"], b"'ABC'")

    # ---- ExecuteStream

    def test_execute_stream_sends_events_in_order_and_the_summary_last(self):
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))  # binary, not valid UTF-8
        code = "\n".join([
            "import base64, sys",
            'print("first", flush=True)',
            'display({"text/plain": "a picture", "image/png": base64.b64encode(%r).decode()}, raw=True)' % png,
            'print("oops", file=sys.stderr)',
            'print("second")',
            "6 * 7",
        ])
        events = list(self.stub.ExecuteStream(self.pb.ExecuteRequest(code=code), timeout=RPC_TIMEOUT_S))
        kinds = [event.WhichOneof("event") for event in events]

        self.assertEqual(kinds[-1], "summary", kinds)
        self.assertEqual(kinds.count("summary"), 1, kinds)
        self.assertEqual(kinds.count("display"), 1, kinds)
        self.assertEqual(kinds.count("result"), 1, kinds)
        self.assertNotIn("error", kinds)
        display, result = kinds.index("display"), kinds.index("result")
        # Output written before a display or result frame arrives before it
        # (stdout and stderr are separate pipes, so their relative order is not promised).
        before_display = b"".join(e.stdout for e in events[:display] if e.HasField("stdout"))
        self.assertTrue(before_display.startswith(b"first\n"), (before_display, kinds))
        self.assertLess(display, result)
        self.assertTrue(all(kinds.index(k) < result for k in ("stdout", "stderr")), kinds)
        self.assertEqual(b"".join(e.stdout for e in events if e.HasField("stdout")), b"first\nsecond\n")
        self.assertEqual(b"".join(e.stderr for e in events if e.HasField("stderr")), b"oops\n")
        self.assertEqual(events[display].display.data["image/png"], png)  # raw bytes, not base64
        self.assertEqual(events[display].display.data["text/plain"], b"a picture")
        self.assertEqual(events[result].result.data["text/plain"], b"42")

        summary = events[-1].summary
        self.assertOutcome(summary, self.pb.OUTCOME_OK)
        self.assertEqual(summary.stdout, b"first\nsecond\n")
        self.assertEqual(summary.stderr, b"oops\n")
        self.assertEqual(list(summary.results), [events[display].display, events[result].result])

    def test_execute_stream_streams_the_error_before_the_summary(self):
        events = list(self.stub.ExecuteStream(self.pb.ExecuteRequest(code='raise KeyError("k")'),
                                              timeout=RPC_TIMEOUT_S))
        self.assertEqual([e.WhichOneof("event") for e in events], ["error", "summary"])
        self.assertEqual(events[0].error.name, "KeyError")
        self.assertEqual(events[0].error.value, "'k'")
        self.assertOutcome(events[1].summary, self.pb.OUTCOME_ERROR)
        self.assertEqual(events[1].summary.error, events[0].error)

    # ---- Sessions

    def test_session_keeps_state_across_executes_until_closed(self):
        label = {"test": "state-%d" % os.getpid()}
        session = self.create_session(labels=label)
        self.assertTrue(session.id)
        self.assertEqual(session.language, self.pb.LANGUAGE_PYTHON)
        self.assertEqual(session.state, self.pb.SESSION_STATE_IDLE)
        self.assertEqual(dict(session.labels), label)

        first = self.execute("x = 20\nprint('set')", session_id=session.id)
        self.assertOutcome(first, self.pb.OUTCOME_OK)
        self.assertEqual(first.session_id, session.id)
        second = self.execute("x + 22", session_id=session.id)
        self.assertOutcome(second, self.pb.OUTCOME_OK)
        self.assertEqual(second.results[0].data["text/plain"], b"42")
        self.assertEqual((first.execution_count, second.execution_count), (1, 2))

        listed = self.stub.ListSessions(self.pb.ListSessionsRequest(labels=label), timeout=RPC_TIMEOUT_S)
        self.assertEqual([s.id for s in listed.sessions], [session.id])
        self.assertEqual(listed.sessions[0].execution_count, 2)
        everything = self.stub.ListSessions(self.pb.ListSessionsRequest(), timeout=RPC_TIMEOUT_S)
        self.assertIn(session.id, [s.id for s in everything.sessions])

        self.stub.CloseSession(self.pb.CloseSessionRequest(session_id=session.id), timeout=RPC_TIMEOUT_S)
        listed = self.stub.ListSessions(self.pb.ListSessionsRequest(labels=label), timeout=RPC_TIMEOUT_S)
        self.assertEqual(list(listed.sessions), [])
        self.assertRpcError(grpc.StatusCode.NOT_FOUND, self.stub.Execute,
                            self.pb.ExecuteRequest(code="x", session_id=session.id))

    # ---- Files

    def test_upload_and_download_round_trip_binary_bytes(self):
        session = self.create_session()
        # Every byte value, over several 64 KiB chunks each way.
        content = bytes(range(256)) * 1000 + b"\x00\xff tail"

        def upload():
            yield self.pb.UploadFileRequest(header=self.pb.UploadFileHeader(
                session_id=session.id, path="data/blob.bin", size=len(content)))
            for offset in range(0, len(content), 64 << 10):
                yield self.pb.UploadFileRequest(chunk=content[offset:offset + (64 << 10)])

        info = self.stub.UploadFile(upload(), timeout=RPC_TIMEOUT_S)
        self.assertEqual((info.path, info.size, info.type), ("data/blob.bin", len(content), "file"))

        # The session sees the same bytes...
        seen = self.execute('import hashlib\nhashlib.sha256(open("data/blob.bin", "rb").read()).hexdigest()',
                            session_id=session.id)
        self.assertOutcome(seen, self.pb.OUTCOME_OK)
        self.assertEqual(seen.results[0].data["text/plain"].decode(),
                         repr(hashlib.sha256(content).hexdigest()))
        listed = self.stub.ListFiles(self.pb.ListFilesRequest(session_id=session.id), timeout=RPC_TIMEOUT_S)
        self.assertIn(("data/blob.bin", len(content), "file"),
                      [(f.path, f.size, f.type) for f in listed.files])

        # ...and so does a download.
        chunks = list(self.stub.DownloadFile(
            self.pb.DownloadFileRequest(session_id=session.id, path="data/blob.bin"), timeout=RPC_TIMEOUT_S))
        self.assertGreater(len(chunks), 1)
        self.assertEqual(chunks[0].total_size, len(content))
        self.assertEqual(b"".join(c.data for c in chunks), content)

    def test_download_returns_a_file_the_session_wrote(self):
        session = self.create_session()
        written = self.execute('open("out.bin", "wb").write(bytes([0, 1, 2, 254, 255]))',
                               session_id=session.id)
        self.assertOutcome(written, self.pb.OUTCOME_OK)
        chunks = list(self.stub.DownloadFile(
            self.pb.DownloadFileRequest(session_id=session.id, path="out.bin"), timeout=RPC_TIMEOUT_S))
        self.assertEqual(b"".join(c.data for c in chunks), bytes([0, 1, 2, 254, 255]))

    # ---- gRPC errors

    def test_unknown_session_is_a_not_found_rpc_error(self):
        error = self.assertRpcError(grpc.StatusCode.NOT_FOUND, self.stub.GetSession,
                                    self.pb.GetSessionRequest(session_id="s-000000000000000000000000"))
        self.assertIn("s-000000000000000000000000", error.details())
        self.assertRpcError(grpc.StatusCode.NOT_FOUND, self.stub.Execute,
                            self.pb.ExecuteRequest(code="1", session_id="s-000000000000000000000000"))
        self.assertRpcError(grpc.StatusCode.NOT_FOUND, self.stub.CloseSession,
                            self.pb.CloseSessionRequest(session_id="s-000000000000000000000000"))
        # A streaming call raises it while being iterated.
        with self.assertRaises(grpc.RpcError) as raised:
            list(self.stub.DownloadFile(self.pb.DownloadFileRequest(
                session_id="s-000000000000000000000000", path="x"), timeout=RPC_TIMEOUT_S))
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_limits_above_the_server_maximum_are_invalid_arguments(self):
        error = self.assertRpcError(grpc.StatusCode.INVALID_ARGUMENT, self.stub.Execute,
                                    self.pb.ExecuteRequest(code="1", limits=self.pb.Limits(wall_ms=10**9)))
        self.assertIn("wall_ms", error.details())


if __name__ == "__main__":
    unittest.main()
