"""Exceptions for calls that Warden could not carry out.

A gRPC error status becomes a `WardenError` subclass named for the status.
What the sandboxed code did (a traceback, a timeout, an OOM kill) is never
an exception: it is an `Execution` whose `outcome` says what happened.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Type

import grpc

__all__ = [
    "WardenError", "InvalidArgument", "NotFound", "PermissionDenied", "ResourceExhausted",
    "Unavailable", "DeadlineExceeded", "Unauthenticated", "FailedPrecondition", "Cancelled",
    "Internal", "from_rpc_error",
]


class WardenError(Exception):
    """A call to wardend failed; `code` is the gRPC status name, `details` the server's message."""

    code: str = "UNKNOWN"

    def __init__(self, details: str, *, code: Optional[str] = None, hint: str = "") -> None:
        if code is not None:
            self.code = code
        self.details = details
        self.hint = hint
        message = "%s: %s" % (self.code, details)
        if hint:
            message += " (%s)" % hint
        super().__init__(message)

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.details)


class InvalidArgument(WardenError):
    """The request is wrong (a limit above the server's maximum, a bad path, ...): fix it."""
    code = "INVALID_ARGUMENT"


class NotFound(WardenError):
    """An unknown, closed or expired session, or a workspace file that does not exist."""
    code = "NOT_FOUND"


class PermissionDenied(WardenError):
    """A workspace path through a symlink the sandboxed code planted."""
    code = "PERMISSION_DENIED"


class ResourceExhausted(WardenError):
    """A quota or a full queue. `retry_after` is the server's hint in seconds, when it gave one."""
    code = "RESOURCE_EXHAUSTED"

    def __init__(self, details: str, *, code: Optional[str] = None, hint: str = "") -> None:
        super().__init__(details, code=code, hint=hint)
        self.retry_after: Optional[float] = parse_retry_after(details)


class Unavailable(WardenError):
    """wardend cannot be reached, or it is shutting down."""
    code = "UNAVAILABLE"


class DeadlineExceeded(WardenError):
    """The call's deadline passed; the execution behind it was stopped."""
    code = "DEADLINE_EXCEEDED"


class Unauthenticated(WardenError):
    """No token, or one the daemon does not accept."""
    code = "UNAUTHENTICATED"


class FailedPrecondition(WardenError):
    """The session stayed busy, or the call does not fit its state (restart while a cell runs)."""
    code = "FAILED_PRECONDITION"


class Cancelled(WardenError):
    """The call was cancelled."""
    code = "CANCELLED"


class Internal(WardenError):
    """Warden itself failed; wardend's log says why."""
    code = "INTERNAL"


_BY_CODE: Dict[grpc.StatusCode, Type[WardenError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: Internal,
}

# wardend's queue says "...; retry in about 104 ms" (docs/api.md, gRPC errors).
_RETRY_HINT = re.compile(r"retry in about (\d+) ms")


def parse_retry_after(details: str) -> Optional[float]:
    """The server's retry hint in seconds, or None when the message has none."""
    match = _RETRY_HINT.search(details or "")
    return int(match.group(1)) / 1000.0 if match else None


def from_rpc_error(error: grpc.RpcError, address: str) -> WardenError:
    """The WardenError for a failed call, with a hint for the setup problems."""
    code = error.code()  # type: ignore[attr-defined]
    details = error.details() or ""  # type: ignore[attr-defined]
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = "is wardend running and listening on %s? pass address= or set WARDEN_ADDR" % address
    elif code == grpc.StatusCode.UNAUTHENTICATED:
        hint = "pass token= or set WARDEN_TOKEN to a token the daemon accepts"
    cls = _BY_CODE.get(code, WardenError)
    return cls(details, code=code.name if cls is WardenError else None, hint=hint)
