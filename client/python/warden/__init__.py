"""Warden's Python client: run untrusted code in Linux sandboxes.

    import warden

    client = warden.Client()               # WARDEN_ADDR, WARDEN_TOKEN
    ex = client.run("print(6 * 7)")        # -> warden.Execution
    with client.session() as s:            # a live interpreter
        s.run("x = 41")
        s.run("x + 1").text                # '42'
    client.import_template("image.tar", "myimage")   # an OCI or `docker save` archive
    client.run("print(1)", template="myimage")       # a one-shot in it
    data = client.create_volume("data")              # kept between sessions
    data.write("in.csv", "a,b\n1,2\n")
    client.session(volumes={"/mnt/data": data})      # mounted at /mnt/data

warden.AsyncClient offers the same as coroutines. docs/python.md in the
Warden repository documents it all; warden.integrations holds adapters for
agent frameworks.
"""
from warden._common import Function, RetryPolicy
from warden._connection import DEFAULT_ADDRESS, TlsFiles
from warden.aio import AsyncClient, AsyncFiles, AsyncSession, AsyncVolume
from warden.client import Client, Files, Session, Volume
from warden.errors import (Cancelled, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
                           NotFound, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                           WardenError)
from warden.types import (AgentEvent, ErrorInfo, Execution, FileInfo, Network, Result, Secret, SessionInfo,
                          TemplateInfo, TemplateLanguage, VolumeEntry, VolumeInfo, VolumeMount)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Files", "Volume", "AsyncClient", "AsyncSession", "AsyncFiles", "AsyncVolume",
    "Execution", "Result", "ErrorInfo", "FileInfo", "SessionInfo", "AgentEvent", "Network", "Secret",
    "TemplateInfo", "TemplateLanguage", "VolumeInfo", "VolumeEntry", "VolumeMount",
    "Function", "RetryPolicy", "TlsFiles", "DEFAULT_ADDRESS",
    "WardenError", "InvalidArgument", "NotFound", "PermissionDenied", "ResourceExhausted",
    "Unavailable", "DeadlineExceeded", "Unauthenticated", "FailedPrecondition", "Cancelled", "Internal",
]
