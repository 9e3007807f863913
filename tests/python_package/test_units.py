"""The package's pure parts, no daemon: addresses and TLS, the retry hint
and policy, MIME decoding, reprs, and function schemas."""
import io

import pytest

import warden
from warden import _common
from warden._connection import Connection, TlsFiles, parse_endpoint
from warden.errors import ResourceExhausted, parse_retry_after
from warden.v1 import executor_pb2 as pb


@pytest.mark.parametrize("address,target,tls", [
    ("unix:/run/warden/wardend.sock", "unix:/run/warden/wardend.sock", False),
    ("/tmp/w.sock", "unix:/tmp/w.sock", False),
    ("127.0.0.1:7000", "127.0.0.1:7000", False),
    ("localhost:7000", "localhost:7000", False),
    ("[::1]:7000", "[::1]:7000", False),
    ("warden.example.com:7443", "warden.example.com:7443", True),
    ("10.0.0.5:7443", "10.0.0.5:7443", True),
    ("ipv4:127.0.0.1:1,10.0.0.1:2", "ipv4:127.0.0.1:1,10.0.0.1:2", True),
])
def test_plaintext_only_on_unix_sockets_and_loopback_as_the_cli_does(address, target, tls):
    endpoint = parse_endpoint(address)
    assert (endpoint.target, endpoint.tls) == (target, tls)


def test_an_address_with_a_scheme_is_refused_with_what_to_write():
    with pytest.raises(warden.InvalidArgument, match="HOST:PORT"):
        parse_endpoint("http://localhost:7000")


def test_tls_files_on_loopback_mean_a_tls_listener(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert Connection.resolve("127.0.0.1:7000", "", TlsFiles()).credentials is None
    assert Connection.resolve("127.0.0.1:7000", "", TlsFiles(ca_file=str(ca))).credentials is not None


def test_a_missing_ca_file_or_half_an_mtls_pair_is_a_clear_error(tmp_path):
    with pytest.raises(warden.InvalidArgument, match="WARDEN_CA_FILE"):
        Connection.resolve("warden.example.com:7443", "", TlsFiles(ca_file=str(tmp_path / "none.pem")))
    with pytest.raises(warden.InvalidArgument, match="both WARDEN_CERT_FILE and WARDEN_KEY_FILE"):
        Connection.resolve("warden.example.com:7443", "", TlsFiles(cert_file=str(tmp_path / "c.pem")))


def test_the_token_goes_into_every_calls_metadata(monkeypatch):
    monkeypatch.setenv("WARDEN_TOKEN", "from-the-environment-0123")
    assert Connection.resolve("unix:/x", None, TlsFiles()).metadata == (
        ("authorization", "Bearer from-the-environment-0123"),)
    assert Connection.resolve("unix:/x", "given", TlsFiles()).metadata == (("authorization", "Bearer given"),)


def test_the_address_comes_from_warden_addr_else_the_default_socket(monkeypatch):
    monkeypatch.delenv("WARDEN_ADDR", raising=False)
    assert warden.Client(token="").address == "unix:/run/warden/wardend.sock"
    monkeypatch.setenv("WARDEN_ADDR", "unix:/tmp/elsewhere.sock")
    assert warden.Client(token="").address == "unix:/tmp/elsewhere.sock"


def test_the_servers_retry_hint_is_read_from_the_message():
    message = "all 2 warm python workers are busy and 64 requests already wait; retry in about 104 ms"
    assert parse_retry_after(message) == pytest.approx(0.104)
    assert ResourceExhausted(message).retry_after == pytest.approx(0.104)
    assert ResourceExhausted("you hold your maximum of 4 sessions; close some first").retry_after is None


def test_backoff_grows_stays_capped_and_waits_at_least_the_hint():
    policy = warden.RetryPolicy(attempts=5, initial_backoff=1.0, max_backoff=3.0, multiplier=2.0)
    unavailable = warden.Unavailable("down")
    assert 0.5 <= policy.delay(unavailable, 1) <= 1.0
    assert 1.5 <= policy.delay(unavailable, 3) <= 3.0
    assert policy.delay(unavailable, 5) is None  # out of attempts
    assert policy.delay(warden.NotFound("gone"), 1) is None  # not retried
    hinted = ResourceExhausted("...; retry in about 9000 ms")
    assert policy.delay(hinted, 1) == pytest.approx(9.0)


def test_results_decode_text_types_and_keep_binary_ones_raw():
    png = b"\x89PNG\r\n\x1a\n\xff\x00"
    result = warden.Result.from_proto(pb.Result(data={"text/plain": b"a plot", "image/png": png,
                                                      "application/json": b'{"a": 1}'}))
    assert result.text == "a plot" and result.png == png and result.json == {"a": 1}
    assert result._repr_mimebundle_()["image/png"] == "iVBORw0KGgr/AA=="  # base64 for Jupyter


def test_an_execution_reads_like_the_issue_says_and_shows_its_plot():
    response = pb.ExecuteResponse(
        outcome=pb.OUTCOME_ERROR, stdout=b"caf\xc3\xa9 \xff\n", execution_count=3, wall_ms=12,
        results=[pb.Result(data={"image/png": b"\x89PNG", "text/plain": b"<Figure>"})],
        error=pb.Error(name="ValueError", value="bad", traceback=["Traceback...", "ValueError: bad"]))
    ex = warden.Execution(response)
    assert (ex.outcome, ex.ok, ex.text, ex.execution_count) == ("ERROR", False, None, 3)
    assert ex.stdout == "caf\u00e9 \ufffd\n" and ex.stdout_bytes == b"caf\xc3\xa9 \xff\n"
    assert ex.error.traceback[-1] == "ValueError: bad"
    assert "outcome=ERROR" in repr(ex) and "ValueError" in repr(ex)
    bundle = ex._repr_mimebundle_()
    assert bundle["image/png"] == "iVBORw=="
    assert "ValueError: bad" in bundle["text/plain"]


def test_function_schemas_come_from_the_signature():
    def lookup(key: str, limit: int = 10) -> dict:
        """Looks a key up."""
    function = warden.Function(lookup)
    assert (function.name, function.description) == ("lookup", "Looks a key up.")
    assert function.parameters == {"type": "object", "required": ["key"],
                                   "properties": {"key": {"type": "string"}, "limit": {"type": "integer"}}}


def test_uploads_take_bytes_str_and_file_objects_in_chunks():
    big = bytes(range(256)) * 600  # over two 64 KiB chunks
    for data in (big, io.BytesIO(big)):
        messages = list(_common.upload_requests("s-1", "a.bin", data))
        assert messages[0].header.path == "a.bin"
        assert b"".join(m.chunk for m in messages[1:]) == big
        assert len(messages) == 4
    assert list(_common.upload_requests("s-1", "t.txt", "é"))[1].chunk == "é".encode()
    with pytest.raises(warden.InvalidArgument, match="bytes, str or a file object"):
        list(_common.upload_requests("s-1", "x", 42))


def test_bad_arguments_fail_before_any_call():
    with pytest.raises(warden.InvalidArgument, match="use python, javascript, bash, typescript, r or java"):
        _common.language_enum("cobol")
    with pytest.raises(warden.InvalidArgument, match="timeout must be positive"):
        _common.limits(timeout=-1)
    with pytest.raises(warden.InvalidArgument, match="unknown agent mode"):
        _common.mode_enum("dream")
