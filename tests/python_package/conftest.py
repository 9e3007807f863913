"""Fixtures: one real wardend for the whole run, on a UNIX socket in a
temporary directory, with two tenants (tokens) and a small session quota,
its HTTP front (MCP, E2B, Kernel Gateway) on a free loopback port, its own
template store and volumes (the tenant "main" may import), and the
agent's model played by tests/fake_openai_server.py in-process.

WARDEN_ADDR and WARDEN_TOKEN are set for the run, so `warden.Client()`
reaches this daemon as the tenant "main" without arguments. E2B_KEY is the
same tenant's token in the shape E2B's SDKs want.

For frameworks/ (run in build/pyenv, with tests/pypi/requirements.txt):
open_wardend, a second daemon without tokens; e2b_env, E2B's three
variables pointing at the daemon's E2B front.
"""
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

STARTUP_TIMEOUT_S = 60
SHUTDOWN_TIMEOUT_S = 15
TOKEN_MAIN = "main-tenant-token-0123456789"
TOKEN_QUOTA = "quota-tenant-token-0123456789"
E2B_KEY = "e2b_0123456789abcdef0123456789abcdef"  # the tenant "main" too
QUOTA_SESSIONS = 6  # sessions.max_per_tenant


def _log_tail(path, lines=40):
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return "(no log: %s)" % e


class FakeModel:
    """tests/fake_openai_server.py served from a thread; `script(steps)` sets the next run's replies."""

    def __init__(self):
        path = pathlib.Path(os.environ["WARDEN_TESTS_DIR"]) / "fake_openai_server.py"
        spec = importlib.util.spec_from_file_location("fake_openai_server", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.module.Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = "http://127.0.0.1:%d/v1" % self.server.server_address[1]

    def script(self, steps):
        with self.module.LOCK:
            self.module.Handler.script = steps
            self.module.STATE.update(next=0, requests=[])

    def requests(self):
        with self.module.LOCK:
            return list(self.module.STATE["requests"])

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def tool_step(code, content=""):
    return {"content": content,
            "tool_calls": [{"name": "execute_code", "arguments": json.dumps({"code": code})}]}


def text_step(content):
    return {"content": content}


def bash_image(path):
    """An OCI image layout, as a tar at `path`, laid out from the host's files:
    bash with the libraries it loads, an /etc file of its own and an ENV."""
    libs = [line.split()[-2] if "=>" in line else line.split()[0]
            for line in subprocess.run(["ldd", "/bin/bash"], capture_output=True, text=True, check=True)
            .stdout.splitlines() if "/" in line]
    files = {"bin/bash": ("/bin/bash", 0o755)}
    files.update({lib.lstrip("/"): (lib, 0o755) for lib in libs})
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({"/".join(name.split("/")[:i]) for name in list(files) + ["etc/x"]
                       for i in range(1, name.count("/") + 1)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, (source, mode) in sorted(files.items()):
            data = open(source, "rb").read()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        release = b"made by test_client\n"
        info = tarfile.TarInfo("etc/image-release")
        info.size, info.mode = len(release), 0o644
        tar.addfile(info, io.BytesIO(release))
    blobs = {}

    def put(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer_blob = put(layer.getvalue())
    config = put(json.dumps({"architecture": "amd64", "os": "linux",
                             "config": {"Env": ["PATH=/bin", "GREETING=hello from the image"]},
                             "rootfs": {"type": "layers", "diff_ids": [layer_blob["digest"]]}}).encode())
    manifest = put(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
        "layers": [dict(layer_blob, mediaType="application/vnd.oci.image.layer.v1.tar")]}).encode())
    index = {"schemaVersion": 2, "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
                                                    annotations={"org.opencontainers.image.ref.name": "tiny"})]}
    with tarfile.open(path, "w") as tar:
        for name, data in [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                           ("index.json", json.dumps(index).encode())] + \
                [("blobs/sha256/" + d.split(":")[1], b) for d, b in blobs.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


class Wardend:
    """A wardend subprocess. `listen` defaults to a UNIX socket in tmp;
    "127.0.0.1:0" picks a port, read back from the log into `address`.
    `config` entries replace the test defaults."""

    def __init__(self, tmp, model, listen=None, config=None):
        bin_dir = pathlib.Path(os.environ["WARDEN_BIN_DIR"])
        wardend = bin_dir / "wardend"
        if not os.access(wardend, os.X_OK):
            raise RuntimeError("%s is missing: build it (cmake --build build --target wardend)" % wardend)
        tokens = tmp / "tokens.json"
        tokens.write_text(json.dumps({"tokens": [{"token": TOKEN_MAIN, "tenant": "main"},
                                                 {"token": E2B_KEY, "tenant": "main"},
                                                 {"token": TOKEN_QUOTA, "tenant": "quota"}]}))
        tokens.chmod(0o600)
        # A host id range of our own, so another wardend on this machine
        # (ctest -j, `make run`, a second daemon here) never maps its sandboxes to the same uids.
        Wardend.started += 1
        settings = {
            "executor": {"host_id_base": 7_000_000 + ((os.getpid() * 4 + Wardend.started) % 16384) * 1024,
                         "host_id_count": 1024},
            "auth": {"tokens_file": str(tokens)},
            "sessions": {"max_per_tenant": QUOTA_SESSIONS},
            "snapshots": {"dir": str(tmp / "snapshots")},
            # Its own image store and volumes; "main" imports templates of its own.
            "templates": {"dir": str(tmp / "templates"), "tenants": ["main"]},
            "volumes": {"dir": str(tmp / "volumes")},
            "shutdown_grace_ms": 2000,
            "http_listen": "127.0.0.1:0",
        }
        settings.update(config or {})
        config_path = tmp / "wardend.json"
        config_path.write_text(json.dumps(settings))
        self.socket = tmp / "w.sock"
        self.address = listen or "unix:%s" % self.socket
        self.log_path = tmp / "wardend.log"
        self.http_port = None  # the HTTP front's, once listening
        self.wants_http = bool(settings.get("http_listen"))
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(wardend), "--config", str(config_path), "--listen", self.address,
             "--llm-base-url", model.base_url, "--llm-model", "fake-model"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_listening()

    started = 0

    def _wait_listening(self):
        import grpc
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        tcp = not self.address.startswith("unix:")
        while not ((self._read_port() if tcp else self.socket.exists()) and self._read_http_port()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError("wardend did not listen within %d s:\n%s" % (STARTUP_TIMEOUT_S,
                                                                               _log_tail(self.log_path)))
            try:
                code = self.process.wait(timeout=min(0.05, remaining))
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError("wardend exited with %d:\n%s" % (code, _log_tail(self.log_path)))
        if tcp:
            return  # TLS: the test connects
        channel = grpc.insecure_channel(self.address)
        try:
            grpc.channel_ready_future(channel).result(timeout=max(deadline - time.monotonic(), 0.1))
        finally:
            channel.close()

    def _read_http_port(self):
        """Sets http_port from the log; True once it is there (or when there is no HTTP front)."""
        if self.http_port is None and self.wants_http:
            match = re.search(r"HTTP front \(MCP at /mcp\) on port (\d+)", self.log_path.read_text(errors="replace"))
            if not match:
                return False
            self.http_port = int(match.group(1))
        return True

    @property
    def http_url(self):
        return "http://127.0.0.1:%d" % self.http_port

    def _read_port(self):
        """Sets address from the log's "wardend listening on HOST:PORT"; False until it is there."""
        match = re.search(r"wardend listening on (\S+?)[,\s]", self.log_path.read_text(errors="replace"))
        if match:
            self.address = match.group(1)
        return bool(match)

    def stop(self):
        """SIGTERM; the exit status, or None if it had to be killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                self.log.close()
                return None
        self.log.close()
        return self.process.returncode


@pytest.fixture(scope="session")
def model():
    fake = FakeModel()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def wardend(model):
    tmp = tempfile.TemporaryDirectory(prefix="warden-pypkg-daemon-")
    daemon = Wardend(pathlib.Path(tmp.name), model)
    saved = {k: os.environ.get(k) for k in ("WARDEN_ADDR", "WARDEN_TOKEN")}
    os.environ["WARDEN_ADDR"] = daemon.address
    os.environ["WARDEN_TOKEN"] = TOKEN_MAIN
    yield daemon
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    died = daemon.process.poll()
    code = daemon.stop()
    log = _log_tail(daemon.log_path)
    tmp.cleanup()
    assert died is None, "wardend died during the tests with status %d:\n%s" % (died, log)
    assert code == 0, "wardend did not exit cleanly on SIGTERM (%r):\n%s" % (code, log)


@pytest.fixture
def client(wardend):
    import warden
    with warden.Client() as c:
        yield c


def pytest_sessionstart(session):
    # The package under test is the installed one, never the source tree.
    import warden
    source = pathlib.Path(__file__).resolve().parent.parent.parent / "client" / "python"
    assert source not in pathlib.Path(warden.__file__).resolve().parents, warden.__file__
    assert sys.prefix != sys.base_prefix, "run in the test's virtualenv (run_tests.py)"


@pytest.fixture(scope="session")
def open_wardend(model):
    """A second wardend whose HTTP front has no tokens (loopback only), for
    clients that cannot send one (jupyter_server's GatewayKernelClient)."""
    tmp = tempfile.TemporaryDirectory(prefix="warden-pypkg-open-")
    daemon = Wardend(pathlib.Path(tmp.name), model, config={"auth": {}, "allow_insecure_loopback": True})
    yield daemon
    code = daemon.stop()
    tmp.cleanup()
    assert code == 0, "the tokenless wardend did not exit cleanly on SIGTERM (%r)" % code


@pytest.fixture
def e2b_env(wardend, monkeypatch):
    """The whole E2B configuration, as a user sets it."""
    monkeypatch.setenv("E2B_API_URL", wardend.http_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", wardend.http_url)
    monkeypatch.setenv("E2B_API_KEY", E2B_KEY)
    return wardend.http_url
