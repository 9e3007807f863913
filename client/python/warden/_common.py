"""What the blocking and the asyncio clients share: turning keyword
arguments into requests, dispatching streamed events to callbacks, the
retry policy, and the client functions an agent run may call.
"""
from __future__ import annotations

import codecs
import inspect
import json
import random
from dataclasses import dataclass
from typing import (Any, Callable, Dict, IO, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from warden.errors import InvalidArgument, ResourceExhausted, Unavailable, WardenError
from warden.types import ErrorInfo, Result, VolumeMount
from warden.v1 import agent_pb2, executor_pb2 as pb, images_pb2

# Text, bytes, or a file object opened for reading (binary or text).
FileData = Union[bytes, bytearray, memoryview, str, IO[bytes], IO[str]]

LANGUAGES: Dict[str, int] = {
    "python": pb.LANGUAGE_PYTHON, "python3": pb.LANGUAGE_PYTHON,
    "javascript": pb.LANGUAGE_JAVASCRIPT, "js": pb.LANGUAGE_JAVASCRIPT, "node": pb.LANGUAGE_JAVASCRIPT,
    "bash": pb.LANGUAGE_BASH, "sh": pb.LANGUAGE_BASH, "shell": pb.LANGUAGE_BASH,
    "typescript": pb.LANGUAGE_TYPESCRIPT, "ts": pb.LANGUAGE_TYPESCRIPT,
    "r": pb.LANGUAGE_R, "java": pb.LANGUAGE_JAVA,
}
MODES: Dict[str, int] = {
    "solve": agent_pb2.AGENT_MODE_SOLVE, "test": agent_pb2.AGENT_MODE_TEST,
    "debug": agent_pb2.AGENT_MODE_DEBUG, "tdd": agent_pb2.AGENT_MODE_TDD,
    "repair": agent_pb2.AGENT_MODE_REPAIR,
}

# The server's largest wall-clock limit is 300 s (docs/api.md); a call's
# deadline stays above the cell's limit so that a timeout comes back as an
# outcome (WALL_TIMEOUT), not as DEADLINE_EXCEEDED.
DEFAULT_CALL_TIMEOUT_S = 330.0
CALL_MARGIN_S = 30.0
UPLOAD_CHUNK = 64 << 10
# An image archive goes in chunks of 1 MiB, as the CLI sends it; an import
# may take long (hundreds of MB unpacked and checked), a volume's file too.
IMPORT_CHUNK = 1 << 20
IMPORT_TIMEOUT_S = 3600.0

# What a session mounts: {path: volume} (a name or a warden.Volume,
# read-write), or warden.VolumeMount entries (read_only=True for read-only).
VolumeMounts = Union[Mapping[str, Any], Sequence[VolumeMount]]


def language_enum(language: str) -> int:
    try:
        return LANGUAGES[language.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument("unknown language %r: use python, javascript, bash, typescript, r or java" % (language,)) from None


def mode_enum(mode: str) -> int:
    try:
        return MODES[mode.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument("unknown agent mode %r: use one of %s" % (mode, ", ".join(MODES))) from None


def _ms(seconds: Optional[float], name: str) -> int:
    if seconds is None:
        return 0
    if seconds <= 0:
        raise InvalidArgument("%s must be positive seconds, got %r" % (name, seconds))
    return max(1, int(round(seconds * 1000)))


def limits(timeout: Optional[float] = None, cpu_timeout: Optional[float] = None,
           memory_mb: Optional[int] = None, output_bytes: Optional[int] = None) -> pb.Limits:
    """Seconds and MiB from the caller -> a Limits message (0: the server's default)."""
    return pb.Limits(wall_ms=_ms(timeout, "timeout"), cpu_ms=_ms(cpu_timeout, "cpu_timeout"),
                     memory_mb=int(memory_mb or 0), output_bytes=int(output_bytes or 0))


def call_timeout(cell_timeout: Optional[float], default: float) -> float:
    """A call's deadline: above the cell's own limit when one is given."""
    return max(default, cell_timeout + CALL_MARGIN_S) if cell_timeout else default


def is_buffer(data: FileData) -> bool:
    """bytes-like or str, as opposed to a file object."""
    return isinstance(data, (bytes, bytearray, memoryview, str))


def read_all(data: FileData) -> bytes:
    """bytes from bytes, str (UTF-8) or a readable file object."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if hasattr(data, "read"):
        content = data.read()
        return content.encode("utf-8") if isinstance(content, str) else bytes(content)
    raise InvalidArgument("file content must be bytes, str or a file object opened for reading, not %s"
                          % type(data).__name__)


def execute_request(code: str, *, language: Optional[str], session_id: str, timeout: Optional[float],
                    cpu_timeout: Optional[float], memory_mb: Optional[int], output_bytes: Optional[int],
                    files: Optional[Mapping[str, FileData]]) -> pb.ExecuteRequest:
    if not isinstance(code, str):
        raise InvalidArgument("code must be a str, not %s" % type(code).__name__)
    request = pb.ExecuteRequest(code=code, session_id=session_id,
                                limits=limits(timeout, cpu_timeout, memory_mb, output_bytes))
    if language is not None:
        request.language = language_enum(language)
    for path, content in (files or {}).items():
        request.files.add(path=path, content=read_all(content))
    return request


def upload_requests(session_id: str, path: str, data: FileData) -> Iterator[pb.UploadFileRequest]:
    """The header, then the content in chunks; file objects are read chunk by chunk."""
    if is_buffer(data):
        content = read_all(data)
        yield pb.UploadFileRequest(header=pb.UploadFileHeader(session_id=session_id, path=path,
                                                              size=len(content)))
        for offset in range(0, len(content), UPLOAD_CHUNK):
            yield pb.UploadFileRequest(chunk=content[offset:offset + UPLOAD_CHUNK])
        return
    if not hasattr(data, "read"):
        read_all(data)  # raises the clear error
    yield pb.UploadFileRequest(header=pb.UploadFileHeader(session_id=session_id, path=path))
    while True:
        chunk = data.read(UPLOAD_CHUNK)
        if not chunk:
            return
        yield pb.UploadFileRequest(chunk=chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk))


def volume_mounts(volumes: Optional[VolumeMounts]) -> List[pb.VolumeMount]:
    """{path: name or Volume} or [VolumeMount, ...] -> VolumeMount messages."""
    if not volumes:
        return []
    if isinstance(volumes, Mapping):
        mounts = [VolumeMount(volume=getattr(v, "name", v), path=path) for path, v in volumes.items()]
    else:
        mounts = list(volumes)
    out = []
    for mount in mounts:
        if not isinstance(mount, VolumeMount) or not isinstance(mount.volume, str) or not mount.volume:
            raise InvalidArgument("volumes must be {path: volume name or warden.Volume} or a list of "
                                  "warden.VolumeMount(volume, path, read_only), not %r" % (mount,))
        out.append(mount.to_proto())
    return out


def _chunks(data: FileData, size: int) -> Iterator[bytes]:
    """bytes, str or a readable file object, in chunks; a buffer is sliced, a file read as it goes."""
    if is_buffer(data):
        content = read_all(data)
        for offset in range(0, len(content), size):
            yield content[offset:offset + size]
        return
    if not hasattr(data, "read"):
        read_all(data)  # raises the clear error
    while True:
        chunk = data.read(size)
        if not chunk:
            return
        yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)


def import_requests(archive: IO[bytes], header: images_pb2.ImportTemplateHeader
                    ) -> Iterator[images_pb2.ImportTemplateRequest]:
    """The header, then the archive in 1 MiB chunks, read as they are sent."""
    yield images_pb2.ImportTemplateRequest(header=header)
    for chunk in _chunks(archive, IMPORT_CHUNK):
        yield images_pb2.ImportTemplateRequest(chunk=chunk)


def volume_write_requests(header: images_pb2.WriteVolumeFileHeader, data: FileData
                          ) -> Iterator[images_pb2.WriteVolumeFileRequest]:
    if is_buffer(data):
        data = read_all(data)
        header.size = len(data)
    yield images_pb2.WriteVolumeFileRequest(header=header)
    for chunk in _chunks(data, UPLOAD_CHUNK):
        yield images_pb2.WriteVolumeFileRequest(chunk=chunk)


def progress_text(event: images_pb2.TemplateProgress) -> str:
    """A progress message as the CLI prints it: "unpacking layer 1/2 (3.0 MiB of 8.0 MiB)"."""
    if event.bytes_total > 0:
        return "%s (%s of %s)" % (event.message, human_bytes(event.bytes_done), human_bytes(event.bytes_total))
    return event.message


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return ("%d %s" % (value, unit)) if unit == "B" else "%.1f %s" % (value, unit)
        value /= 1024
    return "%d B" % n


Callback = Callable[[Any], Any]
OptionalCallback = Optional[Callback]


class StreamCallbacks:
    """Turns ExecuteEvents into callback calls, in the order they arrive.

    stdout/stderr chunks are decoded incrementally, so a UTF-8 character
    split across two chunks reaches the callback whole. on_result gets
    every Result: displayed ones (is_result False) and the trailing value.
    """

    def __init__(self, on_stdout: OptionalCallback, on_stderr: OptionalCallback,
                 on_result: OptionalCallback, on_error: OptionalCallback) -> None:
        self._on = {"stdout": on_stdout, "stderr": on_stderr, "result": on_result, "error": on_error}
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for name in ("stdout", "stderr")}

    @property
    def any(self) -> bool:
        return any(self._on.values())

    def calls_for(self, event: pb.ExecuteEvent) -> List[Tuple[Callback, Any]]:
        """The (callback, argument) pairs this event asks for; the summary flushes the decoders."""
        kind = event.WhichOneof("event")
        calls: List[Tuple[Callback, Any]] = []
        if kind in ("stdout", "stderr"):
            text = self._decoders[kind].decode(getattr(event, kind))
            if text and self._on[kind]:
                calls.append((self._on[kind], text))
        elif kind in ("display", "result") and self._on["result"]:
            calls.append((self._on["result"], Result.from_proto(getattr(event, kind))))
        elif kind == "error" and self._on["error"]:
            calls.append((self._on["error"], ErrorInfo.from_proto(event.error)))
        elif kind == "summary":
            for name in ("stdout", "stderr"):
                tail = self._decoders[name].decode(b"", final=True)
                if tail and self._on[name]:
                    calls.append((self._on[name], tail))
        return calls


@dataclass
class RetryPolicy:
    """Opt-in retries for UNAVAILABLE and RESOURCE_EXHAUSTED, with exponential backoff.

    `attempts` counts the first try. The wait before try n+1 is
    initial_backoff * multiplier**(n-1), jittered, at most max_backoff, and
    at least the server's retry hint (ResourceExhausted.retry_after).
    on_retry(error, attempt, delay) is called before each wait. Streams are
    retried only before their first event arrives.
    """

    attempts: int = 4
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    retry_on: Tuple[type, ...] = (Unavailable, ResourceExhausted)
    on_retry: Optional[Callable[[WardenError, int, float], Any]] = None

    def delay(self, error: WardenError, attempt: int) -> Optional[float]:
        """Seconds to wait before the next try, or None to give up."""
        if attempt >= self.attempts or not isinstance(error, self.retry_on):
            return None
        backoff = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        backoff *= random.uniform(0.5, 1.0)
        hint = getattr(error, "retry_after", None)
        return max(backoff, hint) if hint else backoff


def retry_policy(retries: Union[None, bool, int, RetryPolicy]) -> Optional[RetryPolicy]:
    if retries is None or retries is False:
        return None
    if retries is True:
        return RetryPolicy()
    if isinstance(retries, RetryPolicy):
        return retries
    if isinstance(retries, int) and retries >= 0:
        return RetryPolicy(attempts=retries + 1) if retries else None
    raise InvalidArgument("retries must be a number of retries, True, or a warden.RetryPolicy")


@dataclass
class Function:
    """A function the agent's model may call; it runs here, in the caller's process.

    `handler` gets the model's arguments as keyword arguments and returns
    what the model is told (str as is, anything else as JSON). An exception
    is reported to the model as an error. `parameters` is a JSON Schema
    object; by default it is made from the handler's signature.
    """

    handler: Callable[..., Any]
    name: str = ""
    description: str = ""
    parameters: Optional[Dict[str, Any]] = None

    def __post_init__(self) -> None:
        self.name = self.name or self.handler.__name__
        self.description = self.description or inspect.getdoc(self.handler) or ""
        if self.parameters is None:
            self.parameters = schema_from_signature(self.handler)

    def proto(self) -> agent_pb2.ClientFunction:
        return agent_pb2.ClientFunction(name=self.name, description=self.description,
                                        parameters_json=json.dumps(self.parameters))


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def schema_from_signature(fn: Callable[..., Any]) -> Dict[str, Any]:
    """A JSON Schema object for fn's parameters (simple annotations only)."""
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for name, parameter in inspect.signature(fn).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = parameter.annotation
        if isinstance(annotation, str):
            annotation = {"str": str, "int": int, "float": float, "bool": bool, "list": list,
                          "dict": dict}.get(annotation, annotation)
        properties[name] = {"type": _JSON_TYPES[annotation]} if annotation in _JSON_TYPES else {}
        if parameter.default is parameter.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def functions_by_name(functions: Optional[Sequence[Union[Function, Callable[..., Any]]]]) -> Dict[str, Function]:
    out: Dict[str, Function] = {}
    for f in functions or ():
        function = f if isinstance(f, Function) else Function(f)
        out[function.name] = function
    return out


def agent_start(task: str, *, mode: str, language: Optional[str], files: Optional[Mapping[str, FileData]],
                max_iterations: Optional[int], max_time: Optional[float], max_tokens: Optional[int],
                timeout: Optional[float], memory_mb: Optional[int], model: Optional[str],
                keep_session: bool, functions: Mapping[str, Function], code: Optional[str],
                error: Optional[str], verify_command: Optional[str],
                allowed_paths: Optional[Sequence[str]],
                rollback_failed_steps: bool = False) -> agent_pb2.AgentRequest:
    start = agent_pb2.RunAgentRequest(
        task=task, mode=mode_enum(mode), keep_session=keep_session, model=model or "",
        code=code or "", error=error or "", verify_command=verify_command or "",
        allowed_paths=list(allowed_paths or ()), rollback_failed_steps=rollback_failed_steps,
        budget=agent_pb2.AgentBudget(max_iterations=int(max_iterations or 0),
                                     max_wall_ms=_ms(max_time, "max_time"), max_tokens=int(max_tokens or 0)),
        cell_limits=limits(timeout, None, memory_mb, None))
    if language is not None:
        start.language = language_enum(language)
    for path, content in (files or {}).items():
        start.files.add(path=path, content=read_all(content))
    for function in functions.values():
        start.functions.append(function.proto())
    return agent_pb2.AgentRequest(start=start)


def function_result(call_id: str, value: Any = None, failure: Optional[BaseException] = None,
                    unknown: str = "") -> agent_pb2.AgentRequest:
    if unknown:
        result = agent_pb2.FunctionResult(call_id=call_id, is_error=True,
                                          content="no client function named %r" % unknown)
    elif failure is not None:
        result = agent_pb2.FunctionResult(call_id=call_id, is_error=True,
                                          content="%s: %s" % (type(failure).__name__, failure))
    else:
        content = value if isinstance(value, str) else json.dumps(value, default=str)
        result = agent_pb2.FunctionResult(call_id=call_id, content=content)
    return agent_pb2.AgentRequest(function_result=result)


def function_arguments(call: agent_pb2.FunctionCall) -> Dict[str, Any]:
    """The model's JSON arguments; invalid JSON raises ValueError (reported back as an error)."""
    arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    if not isinstance(arguments, dict):
        raise ValueError("the arguments are not a JSON object: %s" % call.arguments)
    return arguments

