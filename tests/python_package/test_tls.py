"""TLS as the `warden` CLI does it, against a wardend with mTLS on loopback
TCP: the client uses TLS because WARDEN_CA_FILE is set, presents
WARDEN_CERT_FILE/WARDEN_KEY_FILE, and fails clearly without them.
Certificates come from the openssl CLI."""
import pathlib
import subprocess
import tempfile

import pytest

import warden
from conftest import TOKEN_MAIN, Wardend

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(directory, *args):
    run = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
    assert run.returncode == 0, (args, run.stderr)


@pytest.fixture(scope="module")
def tls_daemon(model):
    with tempfile.TemporaryDirectory(prefix="warden-pypkg-tls-") as tmp:
        tmp = pathlib.Path(tmp)
        openssl(tmp, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                "-subj", "/CN=Warden test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        (tmp / "server.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                                        "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        (tmp / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
        for name in ("server", "client"):
            openssl(tmp, "req", *EC, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
            openssl(tmp, "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem")
        daemon = Wardend(tmp, model, listen="127.0.0.1:0", config={
            "tls": {"cert_file": str(tmp / "server.pem"), "key_file": str(tmp / "server.key"),
                    "client_ca_file": str(tmp / "ca.pem")},
            "pools": []})
        try:
            yield daemon, tmp
        finally:
            code = daemon.stop()
            assert code == 0, "wardend (TLS) exited with %r" % code


def test_mtls_with_the_cli_environment_variables(tls_daemon, monkeypatch):
    daemon, certs = tls_daemon
    monkeypatch.setenv("WARDEN_ADDR", daemon.address)
    monkeypatch.setenv("WARDEN_TOKEN", TOKEN_MAIN)
    monkeypatch.setenv("WARDEN_CA_FILE", str(certs / "ca.pem"))
    monkeypatch.setenv("WARDEN_CERT_FILE", str(certs / "client.pem"))
    monkeypatch.setenv("WARDEN_KEY_FILE", str(certs / "client.key"))
    with warden.Client() as client:
        assert client.run("print('over mTLS')").stdout == "over mTLS\n"


def test_without_a_client_certificate_or_without_tls_the_call_fails(tls_daemon):
    daemon, certs = tls_daemon
    no_cert = warden.TlsFiles(ca_file=str(certs / "ca.pem"))
    for client in (warden.Client(daemon.address, token=TOKEN_MAIN, tls=no_cert, timeout=20),
                   warden.Client(daemon.address, token=TOKEN_MAIN, tls=warden.TlsFiles(), timeout=20)):
        with client, pytest.raises(warden.Unavailable, match="is wardend running"):
            client.run("1")
