"""The network tests' world (tests/network/network_test.py, and the egress
pip benchmark): in the caller's own network and mount namespaces (it must
run under `unshare --net --mount`), "the internet" is a second namespace made
here (`ip netns add`, private to the mount namespace) behind a veth pair,
whose loopback carries public-looking addresses served by internet.py:
HTTPS hosts with certificates of a test CA, a local package index, git's
smart HTTP and a header-recording server. A wardend with egress on finds them
through egress.hosts and trusts the test CA (egress.upstream_ca_file,
egress.sandbox_ca_files).

    world = World(extra_wheels=..., wardend_config=...)   # everything up
    world.stub (warden.v1 Executor), world.pb, world.http_port, world.tokens
    world.close()
"""

import datetime
import importlib
import ipaddress
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernel" / "testing"))
import wheels  # noqa: E402

BIN = pathlib.Path(os.environ.get("WARDEN_BIN_DIR", REPO / "build" / "bin"))
RPC_TIMEOUT = 60
SECRET = "sk-live-0123456789abcdef-never-in-the-sandbox"
OPERATOR_SECRET = "op-secret-fedcba9876543210-never-in-the-sandbox"

# The internet: name -> (address, kind).
HOSTS = {
    "one.test": "1.1.1.1",
    "connectivitycheck.gstatic.com": "1.1.1.1",
    "dns.test": "8.8.8.8",
    "pypi.test": "93.184.215.10",
    "git.test": "93.184.215.11",
    "api.test": "93.184.215.12",
    "other.test": "93.184.215.13",
    "v6.test": "2606:4700:4700::1111",
}
# Names that resolve somewhere egress must never go.
TRAPS = {
    "loopback.test": "127.0.0.1",
    "metadata.test": "169.254.169.254",
    "private.test": "10.77.0.2",
    "self.test": "10.77.0.1",
}


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw).stdout


# ---- certificates (python3-cryptography, Debian's)

def make_ca(directory):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Warden network test CA")])
    now = datetime.datetime.utcnow()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    path = directory / "ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def make_leaf(ca_key, ca_cert, directory, name, names, addresses):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.utcnow()
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = directory / ("%s.pem" % name), directory / ("%s.key" % name)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def generate_stubs(out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(REPO / "proto"),
                    "--python_out", str(out_dir), "--grpc_python_out", str(out_dir),
                    str(REPO / "proto" / "warden" / "v1" / "executor.proto")], check=True)
    sys.path.insert(0, str(out_dir))
    return (importlib.import_module("warden.v1.executor_pb2"), importlib.import_module("warden.v1.executor_pb2_grpc"))


class World:
    """The namespaces, the internet's servers and one wardend."""

    def __init__(self, extra_wheels=None, config=None):
        self.extra_wheels = extra_wheels
        self.extra_config = config or {}
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="warden-network-"))
        os.chmod(self.tmp, 0o755)
        self.internet = self.daemon = None
        self.netns = "warden-inet-%d" % os.getpid()
        try:
            self.setup()
        except BaseException:
            self.close()
            raise

    def setup(self):
        tmp = self.tmp
        # Our own namespaces: loopback up, nothing else until the veth.
        sh("ip", "link", "set", "lo", "up")
        # Certificates.
        certs = tmp / "certs"
        certs.mkdir()
        ca_key, ca_cert, self.ca_file = make_ca(certs)
        # The package index: a package with a dependency.
        self.wheels = tmp / "wheels"
        wheels.build_wheel(str(self.wheels), "wardennetdep", "1.0", init="DEP = 'from the index'\n")
        wheels.build_wheel(str(self.wheels), "wardennettest", "2.1",
                           init="from wardennetdep import DEP\nVALUE = 'net ok ' + DEP\n",
                           requires=["wardennetdep>=1.0"])
        if self.extra_wheels:
            self.extra_wheels(str(self.wheels))
        # A git repository.
        repos = tmp / "repos"
        work = tmp / "work"
        sh("git", "init", "-q", "--bare", str(repos / "repo.git"))
        sh("git", "init", "-q", str(work))
        (work / "README").write_text("cloned through the egress proxy\n")
        git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
        sh(*git, "add", "README")
        sh(*git, "commit", "-q", "-m", "first")
        sh(*git, "push", "-q", str(repos / "repo.git"), "HEAD:refs/heads/main")
        sh("git", "-C", str(repos / "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main")
        # The internet's namespace, a veth pair into it, and its addresses.
        sh("ip", "netns", "add", self.netns)
        inet = ["ip", "netns", "exec", self.netns]
        sh("ip", "link", "add", "wd0", "type", "veth", "peer", "name", "inet0", "netns", self.netns)
        sh("ip", "addr", "add", "10.77.0.1/24", "dev", "wd0")
        sh("ip", "-6", "addr", "add", "fd77::1/64", "dev", "wd0", "nodad")
        sh("ip", "link", "set", "wd0", "up")
        sh(*inet, "ip", "link", "set", "lo", "up")
        sh(*inet, "ip", "addr", "add", "10.77.0.2/24", "dev", "inet0")
        sh(*inet, "ip", "-6", "addr", "add", "fd77::2/64", "dev", "inet0", "nodad")
        sh(*inet, "ip", "link", "set", "inet0", "up")
        for address in sorted(set(HOSTS.values())):
            sh(*inet, "ip", "addr", "add", address + ("/128" if ":" in address else "/32"), "dev", "lo")
        sh("ip", "route", "add", "default", "via", "10.77.0.2")
        sh("ip", "-6", "route", "add", "default", "via", "fd77::2")
        # The servers.
        servers = []
        for name, address in HOSTS.items():
            if name == "connectivitycheck.gstatic.com":
                continue
            names = [name] + (["connectivitycheck.gstatic.com"] if address == "1.1.1.1" else [])
            cert, key = make_leaf(ca_key, ca_cert, certs, name, names, [address])
            kind = {"pypi.test": "pypi", "git.test": "git"}.get(name, "echo")
            servers.append({"name": name, "address": address, "port": 443, "tls": True, "cert": cert, "key": key,
                            "kind": kind, "wheels": str(self.wheels), "repos": str(repos)})
        servers.append({"name": "one.test", "address": "1.1.1.1", "port": 80, "tls": False, "kind": "echo"})
        servers.append({"name": "api.test", "address": "93.184.215.12", "port": 80, "tls": False, "kind": "echo"})
        config = tmp / "internet.json"
        ready = tmp / "internet.ready"
        config.write_text(json.dumps({"servers": servers, "ready_file": str(ready)}))
        self.internet = subprocess.Popen(inet + [sys.executable, str(REPO / "tests" / "network" / "internet.py"),
                                                 str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.internet.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the internet's servers did not start")
            time.sleep(0.05)
        self.start_wardend()

    def start_wardend(self):
        tmp = self.tmp
        self.tokens = {"main": "main-token-0123456789abcdef", "narrow": "narrow-token-0123456789abcdef"}
        tokens = tmp / "tokens.json"
        tokens.write_text(json.dumps({"tokens": [{"token": t, "tenant": n} for n, t in self.tokens.items()]}))
        os.chmod(tokens, 0o600)
        secret = tmp / "operator.secret"
        secret.write_text(OPERATOR_SECRET + "\n")
        os.chmod(secret, 0o600)
        hosts = {name: [address] for name, address in {**HOSTS, **TRAPS}.items()}
        config = {
            "auth": {"tokens_file": str(tokens)},
            "executor": {"host_id_base": 7_000_000 + (os.getpid() % 4096) * 1024, "host_id_count": 1024},
            "state_dir": str(tmp / "state"),
            "http": {"sandbox_domain": "sandbox.test", "allow_public_ports": True},
            "sessions": {"hibernate_after_seconds": 2},
            "pools": [{"language": "python", "size": 1, "network": {"allow": ["api.test"]}},
                      {"language": "bash", "size": 0}, {"language": "javascript", "size": 0}],
            "egress": {
                "enabled": True,
                "hosts": hosts,
                "upstream_ca_file": str(self.ca_file),
                "sandbox_ca_files": [str(self.ca_file)],
                "default_ceiling": {"allow": ["*"]},
                "tenants": {"narrow": {"allow": ["api.test", "one.test"], "max_bytes_per_session": 300000,
                                       "session_secrets": False}},
                "secrets": [{"name": "OPERATOR_TOKEN", "value_file": str(secret), "hosts": ["api.test"],
                             "tenants": ["main"]}],
            },
        }
        # Templates (docs/templates.md): "main" imports its own, into a store
        # kept beside the test image's cache (a second import of the same
        # layers is quick).
        config["templates"] = {"dir": "/var/cache/warden-tests/network-template-store", "tenants": ["main"]}
        for key, value in self.extra_config.items():
            config[key] = value
        (tmp / "state").mkdir()
        (tmp / "wardend.json").write_text(json.dumps(config))
        self.socket = tmp / "w.sock"
        self.log_path = tmp / "wardend.log"
        self.log = open(self.log_path, "wb")
        self.daemon = subprocess.Popen(
            [str(BIN / "wardend"), "--config", str(tmp / "wardend.json"), "--listen", "unix:%s" % self.socket,
             "--http-listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        self.http_port = None
        while self.http_port is None:
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("wardend did not start:\n" + self.log_text()[-4000:])
            m = re.search(r"HTTP front[^\n]* on port (\d+)", self.log_text())
            if m:
                self.http_port = int(m.group(1))
            time.sleep(0.05)
        self.pb, self.pb_grpc = generate_stubs(tmp / "gen")
        self.channel = grpc.insecure_channel("unix:%s" % self.socket, options=[("grpc.max_receive_message_length", -1)])
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = self.pb_grpc.ExecutorStub(self.channel)

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def close(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        if self.internet is not None and self.internet.poll() is None:
            self.internet.kill()
            self.internet.wait()
        subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


