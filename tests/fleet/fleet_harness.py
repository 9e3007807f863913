"""What the fleet tests share: certificates (openssl), tokens, the gRPC
stubs and the `warden` package as the build made them, the nodes' and the
gateway's configuration, and waiting on conditions with a deadline.

Used by fleet_local_test.py (wardend processes on loopback),
swarm_fleet_test.py (a three-node Docker Swarm) and bench/fleet_bench.py.
"""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef01"
GATEWAY_NAME = "warden-gateway"
NODE_NAME = "wardend"


def run(*argv, **kw):
    return subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw)


def make_pki(d, node_ips=("127.0.0.1",), gateway_ips=("127.0.0.1",)):
    """Three CAs: the nodes' (server certificates), the gateway's (its
    client certificate, and nothing else), and a rogue one. Returns paths."""
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)

    def ca(name):
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", d / (name + ".key"), "-out", d / (name + ".pem"), "-days", "2",
            "-subj", "/CN=" + name)

    def cert(name, ca_name, cn, sans, usage):
        ext = d / (name + ".ext")
        ext.write_text("subjectAltName=%s\nextendedKeyUsage=%s\n" % (",".join(sans), usage))
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", d / (name + ".key"), "-out", d / (name + ".csr"), "-subj", "/CN=" + cn)
        run("openssl", "x509", "-req", "-in", d / (name + ".csr"), "-CA", d / (ca_name + ".pem"),
            "-CAkey", d / (ca_name + ".key"), "-CAcreateserial", "-days", "2", "-out", d / (name + ".pem"),
            "-extfile", ext)

    for name in ("node-ca", "gateway-ca", "rogue-ca", "client-ca"):
        ca(name)
    cert("node", "node-ca", NODE_NAME, ["DNS:" + NODE_NAME] + ["IP:" + ip for ip in node_ips], "serverAuth")
    cert("gateway", "gateway-ca", GATEWAY_NAME, ["DNS:" + GATEWAY_NAME], "clientAuth")
    # The gateway's own server certificate, for clients off loopback.
    cert("gateway-server", "client-ca", GATEWAY_NAME,
         ["DNS:" + GATEWAY_NAME] + ["IP:" + ip for ip in gateway_ips], "serverAuth")
    cert("rogue", "rogue-ca", GATEWAY_NAME, ["DNS:" + GATEWAY_NAME], "clientAuth")
    cert("impostor", "gateway-ca", "someone-else", ["DNS:someone-else"], "clientAuth")
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return d


def write_tokens(path):
    path = pathlib.Path(path)
    path.write_text(json.dumps({"tokens": [{"token": ALICE, "tenant": "alice"},
                                           {"token": BOB, "tenant": "bob"}]}))
    path.chmod(0o600)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_config(pki, tokens, node_id, shared, listen, state_dir=None, host_id_base=None, paths=None,
                hibernate_after=0, extra=None):
    """A node's wardend.json. `paths` maps the host's paths to the ones
    the node sees (a container mounts them elsewhere)."""
    paths = paths or (lambda p: str(p))
    config = {
        "listen": [listen],
        "tls": {"cert_file": paths(pki / "node.pem"), "key_file": paths(pki / "node.key")},
        "auth": {"tokens_file": paths(tokens)},
        "fleet": {"node_id": node_id, "shared_dir": paths(shared),
                  "gateway_ca_file": paths(pki / "gateway-ca.pem"), "gateway_name": GATEWAY_NAME,
                  "drain_wait_ms": 3000},
        "pools": [{"language": "python", "size": 1, "warm": [], "max_size": 4},
                  {"language": "javascript", "size": 0}, {"language": "bash", "size": 0}],
        "sessions": {"hibernate_after_seconds": hibernate_after, "max_per_tenant": 500},
        "shutdown_grace_ms": 15000,
        "log": {"format": "text", "level": "info"},
    }
    if node_id is None:
        config["fleet"].pop("node_id")
    if state_dir:
        config["state_dir"] = paths(state_dir)
    if host_id_base:
        config["executor"] = {"host_id_base": host_id_base, "host_id_count": 1024}
    for key, value in (extra or {}).items():
        config[key] = value
    return config


def gateway_config(pki, tokens, nodes, listen, http_listen="", paths=None, tls=False, e2b_key_file=None):
    """`nodes`: a list of HOST:PORT, or {"dns": NAME, "port": PORT}.
    `e2b_key_file`: the key every gateway seals E2B access tokens with."""
    paths = paths or (lambda p: str(p))
    config = {
        "listen": [listen],
        "allow_insecure_loopback": True,
        "http_listen": http_listen,
        "auth": {"tokens_file": paths(tokens)},
        "nodes": {"cert_file": paths(pki / "gateway.pem"), "key_file": paths(pki / "gateway.key"),
                  "ca_file": paths(pki / "node-ca.pem"), "server_name": NODE_NAME},
        "placement": {"choices": 2, "handover_wait_ms": 30000},
    }
    if e2b_key_file:
        config["http"] = {"e2b_key_file": paths(e2b_key_file)}
    if tls:
        config["tls"] = {"cert_file": paths(pki / "gateway-server.pem"),
                         "key_file": paths(pki / "gateway-server.key")}
    if isinstance(nodes, dict):
        config["nodes"].update(nodes)
    else:
        config["nodes"]["addresses"] = list(nodes)
    return config


def read(path):
    with open(path) as f:
        return f.read()


_STAGED = []


def stubs(build_dir):
    """warden.v1 stubs as the build generated them (proto/CMakeLists.txt),
    imported from the `warden` package (client/python) staged with them, so
    that `import warden` is the client a user installs."""
    if not _STAGED:
        staged = tempfile.mkdtemp(prefix="warden-client-")
        stage_client_package(build_dir, staged)
        sys.path.insert(0, staged)
        _STAGED.append(staged)
    from warden.v1 import executor_pb2, executor_pb2_grpc, fleet_pb2, fleet_pb2_grpc  # noqa: E402
    return executor_pb2, executor_pb2_grpc, fleet_pb2, fleet_pb2_grpc


def stage_client_package(build_dir, into):
    """The `warden` package (client/python) with the build's stubs, staged
    in `into` for import: what `pip install client/python` installs."""
    into = pathlib.Path(into)
    target = into / "warden"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(ROOT / "client" / "python" / "warden", target)
    for stub in (pathlib.Path(build_dir) / "proto" / "python" / "warden" / "v1").glob("*_pb2*.py*"):
        shutil.copy(stub, target / "v1" / stub.name)
    return into


def wait_until(predicate, timeout, what, interval=0.05):
    """Polls `predicate` until it returns a true value or `timeout` passes;
    returns the value or raises AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as error:  # noqa: BLE001 - reported if it never succeeds
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError("%s: not within %.1f s%s" % (what, timeout, " (last: %r)" % last if last else ""))
        time.sleep(interval)


def node_of(session_id):
    """The node a session id names ("s-" + 24 hex + "-" + node)."""
    return session_id[27:] if len(session_id) > 27 and session_id[26] == "-" else ""


def log_tail(path, lines=30):
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return "(no log: %s)" % error
