"""What calls return: plain Python objects over the proto messages.

`Execution` is an execution's result (Jupyter's shape plus what the sandbox
measured), `Result` one MIME bundle, `ErrorInfo` the traceback of code that
raised, `FileInfo` a workspace entry, `SessionInfo` a session's state and
`AgentEvent` one event of an agent run, `TemplateInfo` an imported image
(docs/templates.md), `VolumeInfo`, `VolumeEntry` and `VolumeMount` a
volume, one of its files and where a session mounts it. The proto stays the
source of the names: outcomes and states are its enum names without the prefix.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from warden.v1 import agent_pb2, executor_pb2 as pb, images_pb2

__all__ = ["Result", "ErrorInfo", "Execution", "FileInfo", "SessionInfo", "AgentEvent", "Network", "Secret",
           "TemplateInfo", "TemplateLanguage", "VolumeInfo", "VolumeEntry", "VolumeMount"]

# MIME types whose bytes are UTF-8 text (docs/api.md, "The result shape");
# every other type (image/png, application/pdf, ...) stays raw bytes.
_TEXT_MIME = ("text/", "application/json", "image/svg+xml", "application/javascript")


def _is_text(mime: str) -> bool:
    return mime.startswith(_TEXT_MIME) or mime.endswith("+json")


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    try:
        return enum.Name(value)[len(prefix):]
    except ValueError:
        return str(value)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class Result:
    """One MIME bundle: displayed output (a plot) or the trailing expression's value.

    `data` maps a MIME type to str for text types and to raw bytes for
    binary ones (`image/png` is the PNG itself, not base64).
    """

    data: Dict[str, Union[str, bytes]]
    is_result: bool = False

    @classmethod
    def from_proto(cls, message: pb.Result) -> "Result":
        data: Dict[str, Union[str, bytes]] = {}
        for mime, raw in message.data.items():
            data[mime] = raw.decode("utf-8", errors="replace") if _is_text(mime) else bytes(raw)
        return cls(data=data, is_result=message.is_result)

    def _text(self, mime: str) -> Optional[str]:
        value = self.data.get(mime)
        return value if isinstance(value, str) else None

    def _bytes(self, mime: str) -> Optional[bytes]:
        value = self.data.get(mime)
        return value if isinstance(value, bytes) else None

    @property
    def text(self) -> Optional[str]:
        """text/plain, or None."""
        return self._text("text/plain")

    @property
    def html(self) -> Optional[str]:
        return self._text("text/html")

    @property
    def markdown(self) -> Optional[str]:
        return self._text("text/markdown")

    @property
    def json(self) -> Any:
        """application/json, parsed; None when absent."""
        value = self._text("application/json")
        return json.loads(value) if value is not None else None

    @property
    def png(self) -> Optional[bytes]:
        """image/png as raw bytes, or None."""
        return self._bytes("image/png")

    @property
    def jpeg(self) -> Optional[bytes]:
        """image/jpeg as raw bytes, or None."""
        return self._bytes("image/jpeg")

    @property
    def svg(self) -> Optional[str]:
        return self._text("image/svg+xml")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
        """The bundle as Jupyter wants it: binary types base64-encoded."""
        return {mime: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
                for mime, value in self.data.items()}

    def __repr__(self) -> str:
        kind = "result" if self.is_result else "display"
        shown = self.text if self.text is not None else ""
        return "Result(%s, %s%s)" % (kind, sorted(self.data), ", text=%r" % _short(shown) if shown else "")


@dataclass(frozen=True)
class ErrorInfo:
    """What the sandboxed code raised: exception name, message and traceback lines."""

    name: str
    value: str
    traceback: List[str] = field(default_factory=list)

    @classmethod
    def from_proto(cls, message: pb.Error) -> "ErrorInfo":
        return cls(name=message.name, value=message.value, traceback=list(message.traceback))

    def __str__(self) -> str:
        return "\n".join(self.traceback) if self.traceback else "%s: %s" % (self.name, self.value)

    def __repr__(self) -> str:
        return "ErrorInfo(%s: %s)" % (self.name, _short(self.value))


class Execution:
    """One execution's result. The call succeeded; `outcome` says how the code ended.

    outcome: "OK", "ERROR", "WALL_TIMEOUT", "CPU_TIMEOUT", "MEMORY_LIMIT",
    "OUTPUT_LIMIT", "VIOLATION", "INTERRUPTED", "SESSION_LOST", "INTERNAL"
    (the proto's Outcome names without "OUTCOME_"); `message` says why for
    limits and failures. stdout/stderr are text (undecodable bytes replaced);
    the exact bytes are on stdout_bytes/stderr_bytes.
    """

    def __init__(self, response: pb.ExecuteResponse) -> None:
        self._proto = response
        self.outcome: str = _enum_name(pb.Outcome, response.outcome, "OUTCOME_")
        self.stdout_bytes: bytes = bytes(response.stdout)
        self.stderr_bytes: bytes = bytes(response.stderr)
        self.stdout_truncated: bool = response.stdout_truncated
        self.stderr_truncated: bool = response.stderr_truncated
        self.results: List[Result] = [Result.from_proto(r) for r in response.results]
        self.error: Optional[ErrorInfo] = (ErrorInfo.from_proto(response.error)
                                           if response.HasField("error") else None)
        self.execution_count: int = response.execution_count
        self.exit_code: int = response.exit_code
        self.wall_ms: int = response.wall_ms
        self.cpu_ms: int = response.cpu_ms
        self.peak_memory_bytes: int = response.peak_memory_bytes
        self.violation: Optional[str] = response.violation or None
        self.message: str = response.message
        self.session_id: Optional[str] = response.session_id or None

    @property
    def ok(self) -> bool:
        """True when the code finished normally (outcome "OK")."""
        return self.outcome == "OK"

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def result(self) -> Optional[Result]:
        """The trailing expression's value (the bundle with is_result), or None."""
        for result in self.results:
            if result.is_result:
                return result
        return None

    @property
    def text(self) -> Optional[str]:
        """text/plain of the trailing expression's value, or None."""
        result = self.result
        return result.text if result is not None else None

    @property
    def proto(self) -> pb.ExecuteResponse:
        """The ExecuteResponse this was made from."""
        return self._proto

    def __repr__(self) -> str:
        parts = ["outcome=%s" % self.outcome]
        if self.stdout_bytes:
            parts.append("stdout=%r" % _short(self.stdout))
        if self.stderr_bytes:
            parts.append("stderr=%r" % _short(self.stderr))
        if self.text is not None:
            parts.append("text=%r" % _short(self.text))
        displays = sum(1 for r in self.results if not r.is_result)
        if displays:
            parts.append("displays=%d" % displays)
        if self.error is not None:
            parts.append("error=%s: %s" % (self.error.name, _short(self.error.value)))
        if self.message:
            parts.append("message=%r" % _short(self.message))
        parts.append("wall_ms=%d" % self.wall_ms)
        return "Execution(%s)" % ", ".join(parts)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
        """What Jupyter shows: the last plot (or the value's rich form) and a text summary."""
        bundle: Dict[str, Any] = {}
        for result in self.results:  # displays first, then the value: later ones win
            for mime, value in result._repr_mimebundle_().items():
                if mime != "text/plain":
                    bundle[mime] = value
        lines = [self.stdout.rstrip("\n")] if self.stdout_bytes else []
        if self.stderr_bytes:
            lines.append(self.stderr.rstrip("\n"))
        if self.text is not None:
            lines.append(self.text)
        if self.error is not None:
            lines.append(str(self.error))
        if not self.ok:
            lines.append("[%s] %s" % (self.outcome, self.message) if self.message else "[%s]" % self.outcome)
        bundle["text/plain"] = "\n".join(lines) if lines else repr(self)
        return bundle


@dataclass(frozen=True)
class FileInfo:
    """A workspace entry: path relative to /workspace, size (files), type."""

    path: str
    size: int
    type: str  # "file", "directory", "symlink", "other"

    @classmethod
    def from_proto(cls, message: pb.FileInfo) -> "FileInfo":
        return cls(path=message.path, size=message.size, type=message.type)


@dataclass(frozen=True)
class Secret:
    """A secret bound to hosts: the sandbox sees NAME=warden-secret-NAME in its
    environment; the egress proxy writes `value` in place of that placeholder
    in the headers of HTTPS requests to `hosts`, and nowhere else."""

    name: str
    value: str
    hosts: Sequence[str]


@dataclass(frozen=True)
class Network:
    """Where a session's connections may go (docs/api.md, "Network").

    Entries are "example.com", "*.example.com" (below it), "*" (everything),
    addresses and networks ("203.0.113.7", "10.0.0.0/8", "[2001:db8::1]"),
    each with an optional ":443" or ":8000-8999". An `allow` entry beats a
    `deny` entry, which beats the default (`allow_by_default`). `headers`
    maps a host ("api.example.com", "*.example.com") to headers set on its
    HTTPS requests. The operator's ceiling for your tenant narrows it all.
    Values of secrets and headers come back hidden.
    """

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    allow_by_default: bool = False
    secrets: Sequence[Secret] = ()
    headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def to_proto(self) -> pb.NetworkPolicy:
        policy = pb.NetworkPolicy(allow=list(self.allow), deny=list(self.deny),
                                  allow_by_default=self.allow_by_default)
        for secret in self.secrets:
            policy.secrets.add(name=secret.name, value=secret.value, hosts=list(secret.hosts))
        for host, headers in self.headers.items():
            policy.header_rules.add(host=host, headers=dict(headers))
        return policy

    @classmethod
    def from_proto(cls, message: pb.NetworkPolicy) -> "Network":
        return cls(allow=tuple(message.allow), deny=tuple(message.deny), allow_by_default=message.allow_by_default,
                   secrets=tuple(Secret(s.name, s.value, tuple(s.hosts)) for s in message.secrets),
                   headers={r.host: dict(r.headers) for r in message.header_rules})


@dataclass(frozen=True)
class SessionInfo:
    """A session as the server reports it (GetSession, ListSessions, RestartSession)."""

    id: str
    language: str        # "python", "javascript", "bash", "typescript", "r", "java"
    state: str           # "IDLE", "BUSY", "LOST", "HIBERNATED"
    labels: Dict[str, str]
    execution_count: int
    memory_bytes: int
    created_unix_ms: int
    expires_unix_ms: int
    age_ms: int
    idle_ms: int
    lost_reason: str
    # Its own network policy (None: its pool's, or none), what it moved
    # through the egress proxy, and its exposed ports' access.
    network: Optional[Network] = None
    network_usage: Dict[str, int] = field(default_factory=dict)
    public_ports: bool = False
    traffic_token: str = ""
    template: str = ""   # the template it runs in (docs/templates.md); "": the host's runtime
    template_digest: str = ""
    volumes: List["VolumeMount"] = field(default_factory=list)  # what it has mounted

    @classmethod
    def from_proto(cls, message: pb.Session) -> "SessionInfo":
        usage = message.network_usage
        return cls(id=message.id, language=_enum_name(pb.Language, message.language, "LANGUAGE_").lower(),
                   state=_enum_name(pb.SessionState, message.state, "SESSION_STATE_"),
                   labels=dict(message.labels), execution_count=message.execution_count,
                   memory_bytes=message.memory_bytes, created_unix_ms=message.created_unix_ms,
                   expires_unix_ms=message.expires_unix_ms, age_ms=message.age_ms,
                   idle_ms=message.idle_ms, lost_reason=message.lost_reason,
                   network=Network.from_proto(message.network) if message.HasField("network") else None,
                   network_usage={"bytes_out": usage.bytes_out, "bytes_in": usage.bytes_in,
                                  "connections": usage.connections, "refused": usage.refused, "open": usage.open},
                   public_ports=getattr(message.ports, "public"), traffic_token=message.traffic_token,
                   template=message.template, template_digest=message.template_digest,
                   volumes=[VolumeMount.from_proto(v) for v in message.volumes])


@dataclass(frozen=True)
class VolumeMount:
    """A volume mounted into a session at `path` (absolute), read-write unless read_only."""

    volume: str
    path: str
    read_only: bool = False

    def to_proto(self) -> pb.VolumeMount:
        return pb.VolumeMount(volume=self.volume, path=self.path, read_only=self.read_only)

    @classmethod
    def from_proto(cls, message: pb.VolumeMount) -> "VolumeMount":
        return cls(volume=message.volume, path=message.path, read_only=message.read_only)


@dataclass(frozen=True)
class TemplateLanguage:
    """What a template can run: the language, whether its image has an interpreter
    for it (where, which version), and `note`: why not, or how its sandboxes start."""

    language: str       # "python", "javascript", "bash"
    available: bool
    interpreter: str    # inside the template, e.g. "/opt/venv/bin/python3"
    version: str
    note: str
    zygote: bool

    @classmethod
    def from_proto(cls, message: images_pb2.TemplateLanguage) -> "TemplateLanguage":
        return cls(language=_enum_name(pb.Language, message.language, "LANGUAGE_").lower(),
                   available=message.available, interpreter=message.interpreter, version=message.version,
                   note=message.note, zygote=message.zygote)


@dataclass(frozen=True)
class TemplateInfo:
    """A template (an imported image, docs/templates.md) as the server reports it.

    public: every tenant may use it (else it is yours). digest: the image's
    config digest (Docker's IMAGE ID), which snapshots record. env,
    working_dir and user come from the image's config; left_out maps what
    of the image was not kept (device files, capabilities) to why.
    """

    name: str
    public: bool
    digest: str
    size_bytes: int
    created_unix_ms: int
    source_ref: str
    languages: List[TemplateLanguage]
    env: List[str]
    working_dir: str
    user: str
    left_out: Dict[str, str]
    layers: List[str]

    def language(self, name: str) -> Optional[TemplateLanguage]:
        """The entry for "python", "javascript" or "bash", or None."""
        return next((l for l in self.languages if l.language == name), None)

    @classmethod
    def from_proto(cls, message: images_pb2.Template) -> "TemplateInfo":
        return cls(name=message.name, public=getattr(message, "public"), digest=message.digest,
                   size_bytes=message.size_bytes, created_unix_ms=message.created_unix_ms,
                   source_ref=message.source_ref,
                   languages=[TemplateLanguage.from_proto(l) for l in message.languages],
                   env=list(message.env), working_dir=message.working_dir, user=message.user,
                   left_out=dict(message.left_out), layers=list(message.layers))


@dataclass(frozen=True)
class VolumeInfo:
    """A volume as the server reports it: its quotas, what it uses, and how
    many sessions (on this node) have it mounted now."""

    name: str
    max_bytes: int
    max_files: int
    used_bytes: int
    used_files: int
    created_unix_ms: int
    mounts: int

    @classmethod
    def from_proto(cls, message: images_pb2.Volume) -> "VolumeInfo":
        return cls(name=message.name, max_bytes=message.max_bytes, max_files=message.max_files,
                   used_bytes=message.used_bytes, used_files=message.used_files,
                   created_unix_ms=message.created_unix_ms, mounts=message.mounts)


@dataclass(frozen=True)
class VolumeEntry:
    """A file, directory or symlink in a volume; path is relative to its root,
    uid and gid as sandboxes see them, times in Unix milliseconds."""

    path: str
    name: str
    type: str  # "file", "directory", "symlink", "other"
    size: int
    mode: int  # permission bits
    uid: int
    gid: int
    modified_unix_ms: int
    symlink_target: str = ""

    @classmethod
    def from_proto(cls, message: images_pb2.VolumeEntry) -> "VolumeEntry":
        return cls(path=message.path, name=message.name, type=message.type, size=message.size,
                   mode=message.mode, uid=message.uid, gid=message.gid,
                   modified_unix_ms=message.modified_unix_ms, symlink_target=message.symlink_target)


class AgentEvent:
    """One event of an agent run (docs/agent.md), in the order the server sent it.

    `kind` is the proto's oneof name: "message", "delta", "execution",
    "error", "function_call", "file_change" or "final"; `data` is that
    message (warden.v1 agent_pb2), whose fields are also readable on the
    event itself (`event.text`, `event.answer`, ...). An "execution" event
    also carries `execution`, its result as a `warden.Execution`.
    """

    def __init__(self, message: agent_pb2.AgentEvent) -> None:
        self.kind: str = message.WhichOneof("event") or ""
        self.data: Any = getattr(message, self.kind) if self.kind else None
        self.proto = message
        self.execution: Optional[Execution] = (Execution(self.data.result)
                                               if self.kind == "execution" else None)

    @property
    def stop_reason(self) -> Optional[str]:
        """For "final": DONE, MAX_ITERATIONS, ... (the proto's names without the prefix)."""
        if self.kind != "final":
            return None
        return _enum_name(agent_pb2.StopReason, self.data.stop_reason, "STOP_REASON_")

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("data")
        if data is None or name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(data, name)
        except AttributeError:
            raise AttributeError("%s event has no field %r" % (self.__dict__.get("kind"), name)) from None

    def __repr__(self) -> str:
        if self.kind == "delta":
            return "AgentEvent(delta, %r)" % _short(self.data.text)
        if self.kind == "message":
            return "AgentEvent(message, iteration=%d, tool_calls=%d)" % (
                self.data.iteration, len(self.data.tool_calls))
        if self.kind == "execution":
            return "AgentEvent(execution, %s, %r)" % (self.execution.outcome if self.execution else "",
                                                      _short(self.data.code))
        if self.kind == "function_call":
            return "AgentEvent(function_call, %s(%s))" % (self.data.name, _short(self.data.arguments))
        if self.kind == "final":
            return "AgentEvent(final, %s, answer=%r)" % (self.stop_reason, _short(self.data.answer))
        if self.kind == "error":
            return "AgentEvent(error, %r)" % _short(self.data.message)
        return "AgentEvent(%s)" % self.kind
