"""How the client reaches wardend, the way the `warden` CLI does it
(client/connection.cc): the address from WARDEN_ADDR, plaintext only on a
UNIX socket or loopback TCP, TLS otherwise (WARDEN_CA_FILE, WARDEN_CERT_FILE,
WARDEN_KEY_FILE), and the bearer token from WARDEN_TOKEN on every call.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import grpc

from warden.errors import InvalidArgument

DEFAULT_ADDRESS = "unix:/run/warden/wardend.sock"

# A summary carries both output streams (up to 16 MiB each) and every rich
# result; gRPC's default 4 MiB receive limit is too small (docs/api.md).
CHANNEL_OPTIONS: List[Tuple[str, int]] = [("grpc.max_receive_message_length", -1)]


def _host_of(host_port: str) -> str:
    """"host:port", "[v6]:port", "host" or a bare IPv6 address -> the host."""
    if host_port.startswith("["):
        close = host_port.find("]")
        return host_port[1:] if close < 0 else host_port[1:close]
    if host_port.count(":") > 1:
        return host_port  # bare IPv6
    return host_port.split(":", 1)[0]


def is_loopback_host(host: str) -> bool:
    """localhost, 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


@dataclass(frozen=True)
class Endpoint:
    target: str  # what grpc takes
    tls: bool


def parse_endpoint(address: str) -> Endpoint:
    """unix:PATH, unix-abstract:NAME, /abs/path, HOST:PORT, [V6]:PORT, dns:, ipv4:, ipv6:."""
    if not address:
        raise InvalidArgument("the daemon address is empty: pass address= or set WARDEN_ADDR")
    if address.startswith(("unix:", "unix-abstract:")):
        return Endpoint(address, tls=False)
    if address.startswith("/"):
        return Endpoint("unix:" + address, tls=False)
    rest = address
    hosts: List[str] = []
    if rest.startswith(("ipv4:", "ipv6:")):
        hosts = [_host_of(one) for one in rest[5:].split(",")]
    else:
        if rest.startswith("dns:"):
            rest = rest[4:]
            if rest.startswith("//"):  # skip the DNS server authority
                slash = rest.find("/", 2)
                rest = "" if slash < 0 else rest[slash + 1:]
        if "://" in rest or "/" in rest:
            raise InvalidArgument("cannot use address %r: write unix:/path/to.sock, HOST:PORT or [IPV6]:PORT"
                                  % address)
        hosts = [_host_of(rest)]
    if any(not host for host in hosts):
        raise InvalidArgument("address %r has no host: write HOST:PORT" % address)
    return Endpoint(address, tls=not all(is_loopback_host(h) for h in hosts))


def _read_pem(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        raise InvalidArgument("cannot read %s %r: %s; check the path and its permissions"
                              % (what, path, e.strerror)) from None
    if not content:
        raise InvalidArgument("%s %r is empty" % (what, path))
    return content


@dataclass(frozen=True)
class TlsFiles:
    ca_file: Optional[str] = None    # None: the system's roots
    cert_file: Optional[str] = None  # with key_file: a client certificate (mTLS)
    key_file: Optional[str] = None

    @classmethod
    def from_env(cls) -> "TlsFiles":
        return cls(os.environ.get("WARDEN_CA_FILE") or None, os.environ.get("WARDEN_CERT_FILE") or None,
                   os.environ.get("WARDEN_KEY_FILE") or None)

    def credentials(self) -> grpc.ChannelCredentials:
        if bool(self.cert_file) != bool(self.key_file):
            raise InvalidArgument("mTLS needs both WARDEN_CERT_FILE and WARDEN_KEY_FILE; set both or neither")
        return grpc.ssl_channel_credentials(
            root_certificates=_read_pem(self.ca_file, "WARDEN_CA_FILE") if self.ca_file else None,
            private_key=_read_pem(self.key_file, "WARDEN_KEY_FILE") if self.key_file else None,
            certificate_chain=_read_pem(self.cert_file, "WARDEN_CERT_FILE") if self.cert_file else None)


@dataclass(frozen=True)
class Connection:
    """Where and how to connect, resolved once per client."""

    address: str
    endpoint: Endpoint
    credentials: Optional[grpc.ChannelCredentials]  # None: plaintext
    metadata: Tuple[Tuple[str, str], ...]

    @classmethod
    def resolve(cls, address: Optional[str], token: Optional[str], tls: Optional[TlsFiles]) -> "Connection":
        address = address or os.environ.get("WARDEN_ADDR") or DEFAULT_ADDRESS
        token = token if token is not None else os.environ.get("WARDEN_TOKEN")
        files = tls if tls is not None else TlsFiles.from_env()
        endpoint = parse_endpoint(address)
        # Loopback is plain text unless TLS files are given: then the caller
        # means a TLS listener (e.g. one reached through an ssh tunnel).
        use_tls = endpoint.tls or (not address.startswith(("unix", "/")) and
                                   bool(files.ca_file or files.cert_file))
        metadata: Sequence[Tuple[str, str]] = [("authorization", "Bearer " + token)] if token else []
        return cls(address, endpoint, files.credentials() if use_tls else None, tuple(metadata))

    def channel(self) -> grpc.Channel:
        if self.credentials is None:
            return grpc.insecure_channel(self.endpoint.target, options=CHANNEL_OPTIONS)
        return grpc.secure_channel(self.endpoint.target, self.credentials, options=CHANNEL_OPTIONS)

    def aio_channel(self) -> "grpc.aio.Channel":
        if self.credentials is None:
            return grpc.aio.insecure_channel(self.endpoint.target, options=CHANNEL_OPTIONS)
        return grpc.aio.secure_channel(self.endpoint.target, self.credentials, options=CHANNEL_OPTIONS)
