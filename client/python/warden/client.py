"""The blocking client: `warden.Client`, its sessions and their files,
templates and volumes.

One Client holds one gRPC channel, which is safe to share between threads.
Every method maps to the RPCs of warden.v1.Executor, warden.v1.Agent,
warden.v1.Templates and warden.v1.Volumes (proto/warden/v1); a gRPC error
becomes a `warden.WardenError`.
"""
from __future__ import annotations

import os
import queue
import time
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import grpc

from warden import _common
from warden._common import FileData, Function, RetryPolicy
from warden._connection import Connection, TlsFiles
from warden.errors import InvalidArgument, NotFound, WardenError, from_rpc_error
from warden.types import (AgentEvent, Execution, FileInfo, Network, SessionInfo, TemplateInfo, VolumeEntry,
                          VolumeInfo)
from warden.v1 import agent_pb2_grpc, executor_pb2 as pb, executor_pb2_grpc, images_pb2, images_pb2_grpc

__all__ = ["Client", "Session", "Files", "Volume"]

Callback = _common.OptionalCallback


class Client:
    """A connection to wardend.

    address: WARDEN_ADDR if not given, else unix:/run/warden/wardend.sock.
    token: WARDEN_TOKEN if not given; sent as "authorization: Bearer TOKEN".
    tls: PEM files for a TLS listener (default: WARDEN_CA_FILE,
    WARDEN_CERT_FILE, WARDEN_KEY_FILE). As with the `warden` CLI, UNIX
    sockets and loopback TCP are plaintext, any other host is TLS.
    timeout: the default deadline of a call, in seconds.
    retries: None (default, no retries), a number of retries, True, or a
    warden.RetryPolicy: retries UNAVAILABLE and RESOURCE_EXHAUSTED with backoff.

    Use it as a context manager, or call close() when done.
    """

    def __init__(self, address: Optional[str] = None, *, token: Optional[str] = None,
                 tls: Optional[TlsFiles] = None, timeout: float = _common.DEFAULT_CALL_TIMEOUT_S,
                 retries: Union[None, bool, int, RetryPolicy] = None) -> None:
        self._connection = Connection.resolve(address, token, tls)
        self._retry = _common.retry_policy(retries)
        self.timeout = timeout
        self._channel = self._connection.channel()
        self._executor = executor_pb2_grpc.ExecutorStub(self._channel)
        self._agent = agent_pb2_grpc.AgentStub(self._channel)
        self._templates = images_pb2_grpc.TemplatesStub(self._channel)
        self._volumes = images_pb2_grpc.VolumesStub(self._channel)

    @property
    def address(self) -> str:
        return self._connection.address

    def close(self) -> None:
        """Closes the channel; sessions stay on the server until closed or expired."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "warden.Client(%r)" % self.address

    # ---- plumbing

    def _error(self, error: grpc.RpcError) -> WardenError:
        return from_rpc_error(error, self.address)

    def _with_retries(self, attempt: Callable[[], Any]) -> Any:
        tries = 0
        while True:
            tries += 1
            try:
                return attempt()
            except grpc.RpcError as e:
                error = self._error(e)
            delay = self._retry.delay(error, tries) if self._retry else None
            if delay is None:
                raise error
            if self._retry and self._retry.on_retry:
                self._retry.on_retry(error, tries, delay)
            time.sleep(delay)

    def _unary(self, method: Any, request: Any, timeout: Optional[float] = None) -> Any:
        return self._with_retries(lambda: method(request, timeout=timeout or self.timeout,
                                                 metadata=self._connection.metadata))

    def _execute(self, request: pb.ExecuteRequest, callbacks: _common.StreamCallbacks,
                 cell_timeout: Optional[float]) -> Execution:
        deadline = _common.call_timeout(cell_timeout, self.timeout)
        if not callbacks.any:
            return Execution(self._unary(self._executor.Execute, request, deadline))

        def first_event() -> Any:
            call = self._executor.ExecuteStream(request, timeout=deadline, metadata=self._connection.metadata)
            return call, next(call)  # retried only until the first event arrives

        call, event = self._with_retries(first_event)
        try:
            while True:
                for callback, argument in callbacks.calls_for(event):
                    callback(argument)
                if event.WhichOneof("event") == "summary":
                    return Execution(event.summary)
                event = next(call)
        except grpc.RpcError as e:
            raise self._error(e) from None
        except StopIteration:
            raise WardenError("the stream ended without a summary", code="INTERNAL") from None
        finally:
            call.cancel()  # no-op once finished; stops the cell if a callback raised

    # ---- Executor

    def run(self, code: str, language: str = "python", *, timeout: Optional[float] = None,
            cpu_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
            output_bytes: Optional[int] = None, files: Optional[Mapping[str, FileData]] = None,
            on_stdout: Callback = None, on_stderr: Callback = None, on_result: Callback = None,
            on_error: Callback = None, template: Optional[str] = None) -> Execution:
        """Runs code one-shot in a fresh sandbox and returns its `Execution`.

        language: "python", "javascript", "bash", "typescript", "r" or "java".
        timeout and cpu_timeout are the cell's limits in seconds, memory_mb the sandbox's memory,
        output_bytes the cap on each of stdout and stderr (None: the
        server's defaults). files: {path: bytes | str | file object},
        written to /workspace first. on_stdout/on_stderr get text and
        on_result each warden.Result (plots, then the value), on_error the
        ErrorInfo, in order as the code produces them. template: run in
        this template (an imported image, docs/templates.md) instead of the
        host's runtime.
        """
        request = _common.execute_request(code, language=language, session_id="", timeout=timeout,
                                          cpu_timeout=cpu_timeout, memory_mb=memory_mb,
                                          output_bytes=output_bytes, files=files)
        request.template = template or ""
        callbacks = _common.StreamCallbacks(on_stdout, on_stderr, on_result, on_error)
        return self._execute(request, callbacks, timeout)

    def session(self, language: str = "python", *, timeout: Optional[float] = None,
                cpu_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
                output_bytes: Optional[int] = None, ttl: Optional[float] = None,
                idle_timeout: Optional[float] = None,
                labels: Optional[Mapping[str, str]] = None, network: Optional[Network] = None,
                public_ports: bool = False, template: Optional[str] = None,
                volumes: Optional[_common.VolumeMounts] = None) -> "Session":
        """Creates a session: a live interpreter whose state persists between runs.

        memory_mb is the whole session's; timeout, cpu_timeout and
        output_bytes are its cells' defaults. ttl and idle_timeout are in
        seconds (None: the server's 1 h and 10 min). network is where its
        code may connect (warden.Network; None: its pool's policy, or no
        network at all); public_ports lets anyone reach its exposed ports
        (if the operator allows it). template: run in this template
        (docs/templates.md) instead of the host's runtime. volumes: your
        volumes to mount, {"/mnt/data": "data"} (a name or a warden.Volume,
        read-write) or [warden.VolumeMount("data", "/mnt/data", read_only=True)].
        Use it in a `with` block to close it at the end.
        """
        request = pb.CreateSessionRequest(
            language=_common.language_enum(language),
            limits=_common.limits(timeout, cpu_timeout, memory_mb, output_bytes),
            ttl_seconds=int(ttl or 0), idle_timeout_seconds=int(idle_timeout or 0), labels=dict(labels or {}),
            template=template or "", volumes=_common.volume_mounts(volumes))
        if network is not None:
            request.network.CopyFrom(network.to_proto())
        setattr(request.ports, "public", public_ports)
        return Session(self, SessionInfo.from_proto(self._unary(self._executor.CreateSession, request)))

    def attach(self, session_id: str) -> "Session":
        """An existing session, by id (NotFound if it is gone or another tenant's)."""
        return Session(self, self.get_session(session_id))

    def restore_snapshot(self, snapshot_id: str, *, ttl_seconds: int = 0,
                         labels: Optional[Dict[str, str]] = None) -> "Session":
        """A new session holding the state of a snapshot (Session.snapshot)."""
        request = pb.RestoreSnapshotRequest(snapshot_id=snapshot_id, ttl_seconds=ttl_seconds,
                                            labels=labels or {})
        return Session(self, SessionInfo.from_proto(self._unary(self._executor.RestoreSnapshot, request)))

    def get_session(self, session_id: str) -> SessionInfo:
        return SessionInfo.from_proto(self._unary(self._executor.GetSession,
                                                  pb.GetSessionRequest(session_id=session_id)))

    def sessions(self, labels: Optional[Mapping[str, str]] = None) -> List[SessionInfo]:
        """Your sessions that carry all of `labels` (all of them without), oldest first."""
        response = self._unary(self._executor.ListSessions, pb.ListSessionsRequest(labels=dict(labels or {})))
        return [SessionInfo.from_proto(s) for s in response.sessions]

    # ---- Templates (docs/templates.md)

    def import_template(self, archive: Union[str, "os.PathLike[str]", IO[bytes]], name: str, *,
                        ref: Optional[str] = None, private: bool = False,
                        on_progress: Callback = None, timeout: float = _common.IMPORT_TIMEOUT_S) -> TemplateInfo:
        """Imports an image as the template `name` and returns it.

        archive: the path of (or a binary file object reading) an OCI image
        layout as a tar, or what `docker save` writes, gzip'd or not. ref
        picks one image of an archive holding several (its tag or ref name).
        private: your own template even if you may make public ones.
        on_progress gets the server's progress lines ("unpacking layer 1/2
        (3.0 MiB of 8.0 MiB)") as they come. Not retried: the archive is
        read once, as it is sent.
        """
        header = images_pb2.ImportTemplateHeader(name=name, ref=ref or "", private=private)
        if isinstance(archive, (str, os.PathLike)):
            try:
                file = open(archive, "rb")
            except OSError as e:
                raise InvalidArgument("cannot read the image archive %s: %s"
                                      % (os.fspath(archive), e.strerror)) from None
            with file:
                header.size = os.fstat(file.fileno()).st_size  # lets the server refuse early
                return self._import(file, header, on_progress, timeout)
        return self._import(archive, header, on_progress, timeout)

    def _import(self, archive: IO[bytes], header: Any, on_progress: Callback, timeout: float) -> TemplateInfo:
        call = self._templates.ImportTemplate(_common.import_requests(archive, header), timeout=timeout,
                                              metadata=self._connection.metadata)
        imported = None
        try:
            for event in call:
                if event.WhichOneof("event") == "template":
                    imported = TemplateInfo.from_proto(event.template)
                elif event.message and on_progress:
                    on_progress(_common.progress_text(event))
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()  # no-op once finished; stops the import if a callback raised
        if imported is None:
            raise WardenError("the import ended without its template", code="INTERNAL")
        return imported

    def templates(self) -> List[TemplateInfo]:
        """The templates you may use: your own, then the public ones."""
        response = self._unary(self._templates.ListTemplates, images_pb2.ListTemplatesRequest())
        return [TemplateInfo.from_proto(t) for t in response.templates]

    def template(self, name: str) -> TemplateInfo:
        """The template `name` as you see it (yours, else the public one); NotFound if there is none."""
        return TemplateInfo.from_proto(self._unary(self._templates.GetTemplate,
                                                   images_pb2.GetTemplateRequest(name=name)))

    def delete_template(self, name: str) -> None:
        """Removes the template `name` as you see it (yours, else the public one, which only the
        operator's tenants may remove). Sessions running in it keep running."""
        public = self.template(name).public
        self._unary(self._templates.DeleteTemplate, images_pb2.DeleteTemplateRequest(name=name, public=public))

    # ---- Volumes (docs/templates.md, "Volumes")

    def create_volume(self, name: str, *, max_bytes: Optional[int] = None,
                      max_files: Optional[int] = None) -> "Volume":
        """Creates your volume `name` ([A-Za-z0-9][A-Za-z0-9._-]{0,62}) with quotas in bytes and files
        (None: the server's defaults); mount it with session(volumes={path: volume})."""
        request = images_pb2.CreateVolumeRequest(name=name, max_bytes=int(max_bytes or 0),
                                                 max_files=int(max_files or 0))
        return Volume(self, VolumeInfo.from_proto(self._unary(self._volumes.CreateVolume, request)).name)

    def volume(self, name: str) -> "Volume":
        """Your volume `name` (NotFound if you have none of that name)."""
        return Volume(self, self.get_volume(name).name)

    def get_volume(self, name: str) -> VolumeInfo:
        return VolumeInfo.from_proto(self._unary(self._volumes.GetVolume, images_pb2.GetVolumeRequest(name=name)))

    def volumes(self) -> List[VolumeInfo]:
        """Your volumes."""
        response = self._unary(self._volumes.ListVolumes, images_pb2.ListVolumesRequest())
        return [VolumeInfo.from_proto(v) for v in response.volumes]

    def delete_volume(self, name: str) -> None:
        """Deletes your volume and its files (FailedPrecondition while a session has it mounted)."""
        self._unary(self._volumes.DeleteVolume, images_pb2.DeleteVolumeRequest(name=name))

    # ---- Agent

    def agent(self, task: str, *, mode: str = "solve", language: Optional[str] = None,
              files: Optional[Mapping[str, FileData]] = None, max_iterations: Optional[int] = None,
              max_time: Optional[float] = None, max_tokens: Optional[int] = None,
              cell_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
              model: Optional[str] = None, keep_session: bool = False,
              functions: Optional[Sequence[Union[Function, Callable[..., Any]]]] = None,
              code: Optional[str] = None, error: Optional[str] = None,
              verify_command: Optional[str] = None,
              allowed_paths: Optional[Sequence[str]] = None,
              rollback_failed_steps: bool = False) -> Iterator[AgentEvent]:
        """Runs Warden's code agent on `task`; yields its AgentEvents as they stream, "final" last.

        mode: "solve", "test", "debug", "tdd" or "repair" (docs/agent.md).
        rollback_failed_steps: fork the session before each step's code and
        roll back a step that fails (Python only; docs/agent.md).
        functions: Python callables (or warden.Function) the model may call;
        they run here and their return value is sent back. Leaving the loop
        early cancels the run, which stops the model and the running cell.
        """
        handlers = _common.functions_by_name(functions)
        start = _common.agent_start(task, mode=mode, language=language, files=files,
                                    max_iterations=max_iterations, max_time=max_time, max_tokens=max_tokens,
                                    timeout=cell_timeout, memory_mb=memory_mb, model=model,
                                    keep_session=keep_session, functions=handlers, code=code, error=error,
                                    verify_command=verify_command, allowed_paths=allowed_paths,
                                    rollback_failed_steps=rollback_failed_steps)
        return self._agent_events(start, handlers, (max_time or 3600.0) + _common.CALL_MARGIN_S)

    def _agent_events(self, start: Any, handlers: Dict[str, Function], deadline: float) -> Iterator[AgentEvent]:
        requests: "queue.Queue[Any]" = queue.Queue()
        requests.put(start)

        def outgoing() -> Iterator[Any]:
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item

        call = self._agent.Run(outgoing(), timeout=deadline, metadata=self._connection.metadata)
        try:
            for message in call:
                event = AgentEvent(message)
                if event.kind == "function_call":
                    requests.put(_answer(handlers, event.data))
                elif event.kind == "final":
                    requests.put(None)
                yield event
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            requests.put(None)
            call.cancel()


def _answer(handlers: Dict[str, Function], call: Any) -> Any:
    function = handlers.get(call.name)
    if function is None:
        return _common.function_result(call.call_id, unknown=call.name)
    try:
        return _common.function_result(call.call_id, function.handler(**_common.function_arguments(call)))
    except Exception as e:  # the model is told, the run goes on
        return _common.function_result(call.call_id, failure=e)


class Files:
    """The files of a session's workspace (/workspace in the sandbox); paths are relative to it."""

    def __init__(self, session: "Session") -> None:
        self._session = session

    def write(self, path: str, data: FileData) -> FileInfo:
        """Writes bytes, str (UTF-8) or a readable file object to `path`; parents are created."""
        client = self._session.client

        def attempt(content: FileData) -> Any:
            return client._executor.UploadFile(_common.upload_requests(self._session.id, path, content),
                                               timeout=client.timeout, metadata=client._connection.metadata)

        if _common.is_buffer(data):
            content = _common.read_all(data)
            return FileInfo.from_proto(client._with_retries(lambda: attempt(content)))
        try:  # a file object is read once, as it is sent: not retried
            return FileInfo.from_proto(attempt(data))
        except grpc.RpcError as e:
            raise client._error(e) from None

    def read(self, path: str) -> bytes:
        """The content of `path` (NotFound if it does not exist)."""
        client = self._session.client

        def attempt() -> bytes:
            chunks = client._executor.DownloadFile(pb.DownloadFileRequest(session_id=self._session.id, path=path),
                                                   timeout=client.timeout, metadata=client._connection.metadata)
            return b"".join(chunk.data for chunk in chunks)

        return client._with_retries(attempt)

    def list(self, path: str = "") -> List[FileInfo]:
        """Everything under `path` (the whole workspace for ""), recursively."""
        client = self._session.client
        response = client._unary(client._executor.ListFiles,
                                 pb.ListFilesRequest(session_id=self._session.id, path=path))
        return [FileInfo.from_proto(f) for f in response.files]

    def __repr__(self) -> str:
        return "warden.Files(session=%r)" % self._session.id


class Volume:
    """Your volume's files, without a session: paths are relative to its root,
    never resolved through "..", a symlink or a mount (InvalidArgument). Files written
    here are the sandbox user's. Made by Client.create_volume() or
    Client.volume(); mount it with Client.session(volumes={path: volume})."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def info(self) -> VolumeInfo:
        """Its quotas and use now."""
        return self.client.get_volume(self.name)

    def write(self, path: str, data: FileData, *, mode: Optional[int] = None,
              make_parents: bool = True) -> VolumeEntry:
        """Writes bytes, str (UTF-8) or a readable file object to `path`, replacing
        what was there; mode: its permission bits (0o644 if not given)."""
        client = self.client

        def attempt(content: FileData) -> Any:
            header = images_pb2.WriteVolumeFileHeader(volume=self.name, path=path, make_parents=make_parents)
            if mode is not None:
                header.mode = mode
            return client._volumes.WriteVolumeFile(_common.volume_write_requests(header, content),
                                                   timeout=client.timeout, metadata=client._connection.metadata)

        if _common.is_buffer(data):
            content = _common.read_all(data)
            return VolumeEntry.from_proto(client._with_retries(lambda: attempt(content)))
        try:  # a file object is read once, as it is sent: not retried
            return VolumeEntry.from_proto(attempt(data))
        except grpc.RpcError as e:
            raise client._error(e) from None

    def read(self, path: str) -> bytes:
        """The content of the file `path` (NotFound if there is none)."""
        client = self.client

        def attempt() -> bytes:
            chunks = client._volumes.ReadVolumeFile(images_pb2.ReadVolumeFileRequest(volume=self.name, path=path),
                                                    timeout=client.timeout, metadata=client._connection.metadata)
            return b"".join(chunk.data for chunk in chunks)

        return client._with_retries(attempt)

    def list(self, path: str = "", depth: int = 1) -> List[VolumeEntry]:
        """The entries under `path` ("" for the root), `depth` levels down."""
        response = self.client._unary(self.client._volumes.ListVolumeFiles,
                                      images_pb2.ListVolumeFilesRequest(volume=self.name, path=path, depth=depth))
        return [VolumeEntry.from_proto(e) for e in response.entries]

    def stat(self, path: str) -> VolumeEntry:
        """The entry at `path` (NotFound if there is none)."""
        return VolumeEntry.from_proto(self.client._unary(
            self.client._volumes.StatVolumePath, images_pb2.StatVolumePathRequest(volume=self.name, path=path)))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path: str, *, parents: bool = True, mode: Optional[int] = None) -> VolumeEntry:
        """Makes the directory `path` (and its missing parents, unless parents is False)."""
        request = images_pb2.MakeVolumeDirectoryRequest(volume=self.name, path=path, make_parents=parents)
        if mode is not None:
            request.mode = mode
        return VolumeEntry.from_proto(self.client._unary(self.client._volumes.MakeVolumeDirectory, request))

    def remove(self, path: str) -> None:
        """Removes the file, symlink or directory (with everything in it) at `path`."""
        self.client._unary(self.client._volumes.RemoveVolumePath,
                           images_pb2.RemoveVolumePathRequest(volume=self.name, path=path))

    def delete(self) -> None:
        """Deletes the volume and its files; see Client.delete_volume."""
        self.client.delete_volume(self.name)

    def __repr__(self) -> str:
        return "warden.Volume(%r)" % self.name


class Session:
    """A live interpreter in its own sandbox; state persists between runs.

    Made by Client.session() or Client.attach(). Several clients (and
    threads) may use one session; it runs one cell at a time. Closed by
    close() or at the end of a `with` block.
    """

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self.client = client
        self.id: str = info.id
        self.language: str = info.language
        self.files = Files(self)
        self._closed = False
        self.left_out: Dict[str, str] = {}  # a fork's: what it could not copy

    def run(self, code: str, *, timeout: Optional[float] = None, cpu_timeout: Optional[float] = None,
            output_bytes: Optional[int] = None, on_stdout: Callback = None, on_stderr: Callback = None,
            on_result: Callback = None, on_error: Callback = None) -> Execution:
        """Runs a cell in this session; the arguments are Client.run()'s."""
        request = _common.execute_request(code, language=None, session_id=self.id, timeout=timeout,
                                          cpu_timeout=cpu_timeout, memory_mb=None,
                                          output_bytes=output_bytes, files=None)
        callbacks = _common.StreamCallbacks(on_stdout, on_stderr, on_result, on_error)
        return self.client._execute(request, callbacks, timeout)

    def info(self) -> SessionInfo:
        """The session's state as the server reports it now."""
        return self.client.get_session(self.id)

    def update_network(self, network: Optional[Network]) -> SessionInfo:
        """Replaces the session's network policy (None: none of its own, so its
        pool's). Connections already open keep the rules they opened under."""
        request = pb.UpdateNetworkRequest(session_id=self.id)
        if network is not None:
            request.network.CopyFrom(network.to_proto())
        return SessionInfo.from_proto(self.client._unary(self.client._executor.UpdateNetwork, request))

    def interrupt(self) -> bool:
        """Stops the running cell (KeyboardInterrupt in Python); False when nothing ran."""
        response = self.client._unary(self.client._executor.InterruptSession,
                                      pb.InterruptSessionRequest(session_id=self.id))
        return response.was_busy

    def restart(self, keep_files: bool = True) -> SessionInfo:
        """A fresh interpreter; the workspace is kept unless keep_files is False."""
        return SessionInfo.from_proto(self.client._unary(
            self.client._executor.RestartSession,
            pb.RestartSessionRequest(session_id=self.id, clear_workspace=not keep_files)))

    def fork(self, labels: Optional[Dict[str, str]] = None) -> "Session":
        """A new session in its own sandbox holding a copy of this one's
        variables and files (Python); this session is not changed. What
        could not be copied (an open file, a socket, ...) is in the new
        session's ``left_out``: {name: why}."""
        response = self.client._unary(self.client._executor.ForkSession,
                                      pb.ForkSessionRequest(session_id=self.id, labels=labels or {}))
        forked = Session(self.client, SessionInfo.from_proto(response.session))
        forked.left_out = dict(response.left_out)
        return forked

    def snapshot(self) -> Dict[str, Any]:
        """Saves this session's state on the server; returns the snapshot's
        id, size, and ``left_out`` ({name: why}: what could not be saved).
        ``Client.restore_snapshot(id)`` starts a session from it."""
        s = self.client._unary(self.client._executor.SnapshotSession,
                               pb.SnapshotSessionRequest(session_id=self.id))
        return {"id": s.snapshot_id, "size_bytes": s.size_bytes, "complete": s.complete,
                "execution_count": s.execution_count, "left_out": dict(s.left_out)}

    def close(self) -> None:
        """Closes the session on the server (a running cell is interrupted). Idempotent."""
        if self._closed:
            return
        self.client._unary(self.client._executor.CloseSession, pb.CloseSessionRequest(session_id=self.id))
        self._closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        except NotFound:  # already closed elsewhere, or expired
            self._closed = True

    def __repr__(self) -> str:
        return "warden.Session(%r, %s%s)" % (self.id, self.language, ", closed" if self._closed else "")
