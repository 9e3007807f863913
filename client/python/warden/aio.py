"""The asyncio client: `warden.AsyncClient`, the same methods as
`warden.Client` as coroutines on grpc.aio, with async iterators for streams.

Make and use an AsyncClient inside one event loop; its channel is opened on
first use. Callbacks and agent functions may be plain functions or
coroutine functions.
"""
from __future__ import annotations

import asyncio
import inspect
import os
from typing import (IO, Any, AsyncIterator, Awaitable, Callable, Dict, Generator, List, Mapping, Optional,
                    Sequence, Union)

import grpc
import grpc.aio

from warden import _common
from warden._common import FileData, Function, RetryPolicy
from warden._connection import Connection, TlsFiles
from warden.errors import InvalidArgument, NotFound, WardenError, from_rpc_error
from warden.types import (AgentEvent, Execution, FileInfo, Network, SessionInfo, TemplateInfo, VolumeEntry,
                          VolumeInfo)
from warden.v1 import agent_pb2_grpc, executor_pb2 as pb, executor_pb2_grpc, images_pb2, images_pb2_grpc

__all__ = ["AsyncClient", "AsyncSession", "AsyncFiles", "AsyncVolume"]

Callback = _common.OptionalCallback


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncClient:
    """A connection to wardend for asyncio code; arguments as for warden.Client.

    `async with warden.AsyncClient() as client:` closes the channel at the end.
    """

    def __init__(self, address: Optional[str] = None, *, token: Optional[str] = None,
                 tls: Optional[TlsFiles] = None, timeout: float = _common.DEFAULT_CALL_TIMEOUT_S,
                 retries: Union[None, bool, int, RetryPolicy] = None) -> None:
        self._connection = Connection.resolve(address, token, tls)
        self._retry = _common.retry_policy(retries)
        self.timeout = timeout
        self._channel: Optional[grpc.aio.Channel] = None

    @property
    def address(self) -> str:
        return self._connection.address

    def _stubs(self) -> "tuple[executor_pb2_grpc.ExecutorStub, agent_pb2_grpc.AgentStub]":
        if self._channel is None:  # in the running loop, where grpc.aio wants it
            self._channel = self._connection.aio_channel()
            self._executor = executor_pb2_grpc.ExecutorStub(self._channel)
            self._agent = agent_pb2_grpc.AgentStub(self._channel)
            self._templates = images_pb2_grpc.TemplatesStub(self._channel)
            self._volumes = images_pb2_grpc.VolumesStub(self._channel)
        return self._executor, self._agent

    @property
    def _ex(self) -> executor_pb2_grpc.ExecutorStub:
        return self._stubs()[0]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "warden.AsyncClient(%r)" % self.address

    # ---- plumbing

    def _error(self, error: grpc.RpcError) -> WardenError:
        return from_rpc_error(error, self.address)

    async def _with_retries(self, attempt: Callable[[], Awaitable[Any]]) -> Any:
        tries = 0
        while True:
            tries += 1
            try:
                return await attempt()
            except grpc.RpcError as e:
                error = self._error(e)
            delay = self._retry.delay(error, tries) if self._retry else None
            if delay is None:
                raise error
            if self._retry and self._retry.on_retry:
                await _maybe_await(self._retry.on_retry(error, tries, delay))
            await asyncio.sleep(delay)

    async def _unary(self, name: str, request: Any, timeout: Optional[float] = None, service: str = "_executor") -> Any:
        self._stubs()
        method = getattr(getattr(self, service), name)
        return await self._with_retries(lambda: method(request, timeout=timeout or self.timeout,
                                                       metadata=self._connection.metadata))

    async def _execute(self, request: pb.ExecuteRequest, callbacks: _common.StreamCallbacks,
                       cell_timeout: Optional[float]) -> Execution:
        deadline = _common.call_timeout(cell_timeout, self.timeout)
        if not callbacks.any:
            return Execution(await self._unary("Execute", request, deadline))

        async def first_event() -> Any:
            call = self._ex.ExecuteStream(request, timeout=deadline, metadata=self._connection.metadata)
            event = await call.read()  # retried only until the first event arrives
            return call, event

        call, event = await self._with_retries(first_event)
        try:
            while event is not grpc.aio.EOF:
                for callback, argument in callbacks.calls_for(event):
                    await _maybe_await(callback(argument))
                if event.WhichOneof("event") == "summary":
                    return Execution(event.summary)
                event = await call.read()
            raise WardenError("the stream ended without a summary", code="INTERNAL")
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()  # no-op once finished; stops the cell if a callback raised

    # ---- Executor

    async def run(self, code: str, language: str = "python", *, timeout: Optional[float] = None,
                  cpu_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
                  output_bytes: Optional[int] = None, files: Optional[Mapping[str, FileData]] = None,
                  on_stdout: Callback = None, on_stderr: Callback = None, on_result: Callback = None,
                  on_error: Callback = None, template: Optional[str] = None) -> Execution:
        """Runs code one-shot in a fresh sandbox; see warden.Client.run."""
        request = _common.execute_request(code, language=language, session_id="", timeout=timeout,
                                          cpu_timeout=cpu_timeout, memory_mb=memory_mb,
                                          output_bytes=output_bytes, files=files)
        request.template = template or ""
        return await self._execute(request, _common.StreamCallbacks(on_stdout, on_stderr, on_result, on_error),
                                   timeout)

    def session(self, language: str = "python", *, timeout: Optional[float] = None,
                cpu_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
                output_bytes: Optional[int] = None, ttl: Optional[float] = None,
                idle_timeout: Optional[float] = None,
                labels: Optional[Mapping[str, str]] = None, network: Optional[Network] = None,
                public_ports: bool = False, template: Optional[str] = None,
                volumes: Optional[_common.VolumeMounts] = None) -> "_SessionOpener":
        """Creates a session; see warden.Client.session.

        Either `session = await client.session()` (close it yourself) or
        `async with client.session() as session:` (closed at the end).
        """
        request = pb.CreateSessionRequest(
            language=_common.language_enum(language),
            limits=_common.limits(timeout, cpu_timeout, memory_mb, output_bytes),
            ttl_seconds=int(ttl or 0), idle_timeout_seconds=int(idle_timeout or 0), labels=dict(labels or {}),
            template=template or "", volumes=_common.volume_mounts(volumes))
        if network is not None:
            request.network.CopyFrom(network.to_proto())
        setattr(request.ports, "public", public_ports)
        return _SessionOpener(self, request)

    async def attach(self, session_id: str) -> "AsyncSession":
        """An existing session, by id (NotFound if it is gone or another tenant's)."""
        return AsyncSession(self, await self.get_session(session_id))

    async def get_session(self, session_id: str) -> SessionInfo:
        return SessionInfo.from_proto(await self._unary("GetSession", pb.GetSessionRequest(session_id=session_id)))

    async def sessions(self, labels: Optional[Mapping[str, str]] = None) -> List[SessionInfo]:
        """Your sessions that carry all of `labels`, oldest first."""
        response = await self._unary("ListSessions", pb.ListSessionsRequest(labels=dict(labels or {})))
        return [SessionInfo.from_proto(s) for s in response.sessions]

    # ---- Templates and volumes; see warden.Client

    async def import_template(self, archive: Union[str, "os.PathLike[str]", IO[bytes]], name: str, *,
                              ref: Optional[str] = None, private: bool = False, on_progress: Callback = None,
                              timeout: float = _common.IMPORT_TIMEOUT_S) -> TemplateInfo:
        """Imports an image as the template `name`; see warden.Client.import_template."""
        header = images_pb2.ImportTemplateHeader(name=name, ref=ref or "", private=private)
        if not isinstance(archive, (str, os.PathLike)):
            return await self._import(archive, header, on_progress, timeout)
        try:
            file = open(archive, "rb")
        except OSError as e:
            raise InvalidArgument("cannot read the image archive %s: %s"
                                  % (os.fspath(archive), e.strerror)) from None
        with file:
            header.size = os.fstat(file.fileno()).st_size
            return await self._import(file, header, on_progress, timeout)

    async def _import(self, archive: IO[bytes], header: Any, on_progress: Callback, timeout: float) -> TemplateInfo:
        self._stubs()
        # The archive is read a chunk at a time as it is sent, as AsyncFiles.write reads a file object.
        call = self._templates.ImportTemplate(_common.import_requests(archive, header), timeout=timeout,
                                              metadata=self._connection.metadata)
        imported = None
        try:
            async for event in call:
                if event.WhichOneof("event") == "template":
                    imported = TemplateInfo.from_proto(event.template)
                elif event.message and on_progress:
                    await _maybe_await(on_progress(_common.progress_text(event)))
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()
        if imported is None:
            raise WardenError("the import ended without its template", code="INTERNAL")
        return imported

    async def templates(self) -> List[TemplateInfo]:
        response = await self._unary("ListTemplates", images_pb2.ListTemplatesRequest(), service="_templates")
        return [TemplateInfo.from_proto(t) for t in response.templates]

    async def template(self, name: str) -> TemplateInfo:
        return TemplateInfo.from_proto(await self._unary("GetTemplate", images_pb2.GetTemplateRequest(name=name),
                                                         service="_templates"))

    async def delete_template(self, name: str) -> None:
        public = (await self.template(name)).public
        await self._unary("DeleteTemplate", images_pb2.DeleteTemplateRequest(name=name, public=public),
                          service="_templates")

    async def create_volume(self, name: str, *, max_bytes: Optional[int] = None,
                            max_files: Optional[int] = None) -> "AsyncVolume":
        request = images_pb2.CreateVolumeRequest(name=name, max_bytes=int(max_bytes or 0),
                                                 max_files=int(max_files or 0))
        return AsyncVolume(self, (await self._unary("CreateVolume", request, service="_volumes")).name)

    async def volume(self, name: str) -> "AsyncVolume":
        return AsyncVolume(self, (await self.get_volume(name)).name)

    async def get_volume(self, name: str) -> VolumeInfo:
        return VolumeInfo.from_proto(await self._unary("GetVolume", images_pb2.GetVolumeRequest(name=name),
                                                       service="_volumes"))

    async def volumes(self) -> List[VolumeInfo]:
        response = await self._unary("ListVolumes", images_pb2.ListVolumesRequest(), service="_volumes")
        return [VolumeInfo.from_proto(v) for v in response.volumes]

    async def delete_volume(self, name: str) -> None:
        await self._unary("DeleteVolume", images_pb2.DeleteVolumeRequest(name=name), service="_volumes")

    # ---- Agent

    async def agent(self, task: str, *, mode: str = "solve", language: Optional[str] = None,
                    files: Optional[Mapping[str, FileData]] = None, max_iterations: Optional[int] = None,
                    max_time: Optional[float] = None, max_tokens: Optional[int] = None,
                    cell_timeout: Optional[float] = None, memory_mb: Optional[int] = None,
                    model: Optional[str] = None, keep_session: bool = False,
                    functions: Optional[Sequence[Union[Function, Callable[..., Any]]]] = None,
                    code: Optional[str] = None, error: Optional[str] = None,
                    verify_command: Optional[str] = None,
                    allowed_paths: Optional[Sequence[str]] = None,
                    rollback_failed_steps: bool = False) -> AsyncIterator[AgentEvent]:
        """An agent run's events as an async iterator; see warden.Client.agent."""
        handlers = _common.functions_by_name(functions)
        start = _common.agent_start(task, mode=mode, language=language, files=files,
                                    max_iterations=max_iterations, max_time=max_time, max_tokens=max_tokens,
                                    timeout=cell_timeout, memory_mb=memory_mb, model=model,
                                    keep_session=keep_session, functions=handlers, code=code, error=error,
                                    verify_command=verify_command, allowed_paths=allowed_paths,
                                    rollback_failed_steps=rollback_failed_steps)
        call = self._stubs()[1].Run(timeout=(max_time or 3600.0) + _common.CALL_MARGIN_S,
                                    metadata=self._connection.metadata)
        try:
            await call.write(start)
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    return
                event = AgentEvent(message)
                if event.kind == "function_call":
                    await call.write(await _answer(handlers, event.data))
                elif event.kind == "final":
                    await call.done_writing()
                yield event
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()


async def _answer(handlers: Dict[str, Function], call: Any) -> Any:
    function = handlers.get(call.name)
    if function is None:
        return _common.function_result(call.call_id, unknown=call.name)
    try:
        value = await _maybe_await(function.handler(**_common.function_arguments(call)))
        return _common.function_result(call.call_id, value)
    except Exception as e:  # the model is told, the run goes on
        return _common.function_result(call.call_id, failure=e)


class _SessionOpener:
    """What AsyncClient.session() returns: awaitable, or an async context manager."""

    def __init__(self, client: AsyncClient, request: pb.CreateSessionRequest) -> None:
        self._client = client
        self._request = request
        self._session: Optional[AsyncSession] = None

    async def _open(self) -> "AsyncSession":
        info = SessionInfo.from_proto(await self._client._unary("CreateSession", self._request))
        return AsyncSession(self._client, info)

    def __await__(self) -> Generator[Any, None, "AsyncSession"]:
        return self._open().__await__()

    async def __aenter__(self) -> "AsyncSession":
        self._session = await self._open()
        return self._session

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.__aexit__(*exc)


class AsyncFiles:
    """A session's workspace files, as coroutines; see warden.Files."""

    def __init__(self, session: "AsyncSession") -> None:
        self._session = session

    async def write(self, path: str, data: FileData) -> FileInfo:
        """Writes bytes, str (UTF-8) or a readable file object to `path`."""
        client = self._session.client

        def attempt(content: FileData) -> Any:
            return client._ex.UploadFile(_common.upload_requests(self._session.id, path, content),
                                         timeout=client.timeout, metadata=client._connection.metadata)

        if _common.is_buffer(data):
            content = _common.read_all(data)
            return FileInfo.from_proto(await client._with_retries(lambda: attempt(content)))
        try:  # a file object is read once, as it is sent: not retried
            return FileInfo.from_proto(await attempt(data))
        except grpc.RpcError as e:
            raise client._error(e) from None

    async def read(self, path: str) -> bytes:
        """The content of `path`."""
        client = self._session.client

        async def attempt() -> bytes:
            call = client._ex.DownloadFile(pb.DownloadFileRequest(session_id=self._session.id, path=path),
                                           timeout=client.timeout, metadata=client._connection.metadata)
            return b"".join([chunk.data async for chunk in call])

        return await client._with_retries(attempt)

    async def list(self, path: str = "") -> List[FileInfo]:
        """Everything under `path` (the whole workspace for ""), recursively."""
        response = await self._session.client._unary(
            "ListFiles", pb.ListFilesRequest(session_id=self._session.id, path=path))
        return [FileInfo.from_proto(f) for f in response.files]

    def __repr__(self) -> str:
        return "warden.AsyncFiles(session=%r)" % self._session.id


class AsyncVolume:
    """A volume's files, as coroutines; see warden.Volume."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self.client = client
        self.name = name

    async def _call(self, method: str, request: Any) -> Any:
        return await self.client._unary(method, request, service="_volumes")

    async def info(self) -> VolumeInfo:
        return await self.client.get_volume(self.name)

    async def write(self, path: str, data: FileData, *, mode: Optional[int] = None,
                    make_parents: bool = True) -> VolumeEntry:
        client = self.client
        client._stubs()

        def attempt(content: FileData) -> Any:
            header = images_pb2.WriteVolumeFileHeader(volume=self.name, path=path, make_parents=make_parents)
            if mode is not None:
                header.mode = mode
            return client._volumes.WriteVolumeFile(_common.volume_write_requests(header, content),
                                                   timeout=client.timeout, metadata=client._connection.metadata)

        if _common.is_buffer(data):
            content = _common.read_all(data)
            return VolumeEntry.from_proto(await client._with_retries(lambda: attempt(content)))
        try:  # a file object is read once, as it is sent: not retried
            return VolumeEntry.from_proto(await attempt(data))
        except grpc.RpcError as e:
            raise client._error(e) from None

    async def read(self, path: str) -> bytes:
        client = self.client
        client._stubs()

        async def attempt() -> bytes:
            call = client._volumes.ReadVolumeFile(images_pb2.ReadVolumeFileRequest(volume=self.name, path=path),
                                                  timeout=client.timeout, metadata=client._connection.metadata)
            return b"".join([chunk.data async for chunk in call])

        return await client._with_retries(attempt)

    async def list(self, path: str = "", depth: int = 1) -> List[VolumeEntry]:
        response = await self._call("ListVolumeFiles",
                                    images_pb2.ListVolumeFilesRequest(volume=self.name, path=path, depth=depth))
        return [VolumeEntry.from_proto(e) for e in response.entries]

    async def stat(self, path: str) -> VolumeEntry:
        return VolumeEntry.from_proto(await self._call(
            "StatVolumePath", images_pb2.StatVolumePathRequest(volume=self.name, path=path)))

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
            return True
        except NotFound:
            return False

    async def mkdir(self, path: str, *, parents: bool = True, mode: Optional[int] = None) -> VolumeEntry:
        request = images_pb2.MakeVolumeDirectoryRequest(volume=self.name, path=path, make_parents=parents)
        if mode is not None:
            request.mode = mode
        return VolumeEntry.from_proto(await self._call("MakeVolumeDirectory", request))

    async def remove(self, path: str) -> None:
        await self._call("RemoveVolumePath", images_pb2.RemoveVolumePathRequest(volume=self.name, path=path))

    async def delete(self) -> None:
        await self.client.delete_volume(self.name)

    def __repr__(self) -> str:
        return "warden.AsyncVolume(%r)" % self.name


class AsyncSession:
    """A live interpreter, as coroutines; see warden.Session."""

    def __init__(self, client: AsyncClient, info: SessionInfo) -> None:
        self.client = client
        self.id: str = info.id
        self.language: str = info.language
        self.files = AsyncFiles(self)
        self._closed = False

    async def run(self, code: str, *, timeout: Optional[float] = None, cpu_timeout: Optional[float] = None,
                  output_bytes: Optional[int] = None, on_stdout: Callback = None, on_stderr: Callback = None,
                  on_result: Callback = None, on_error: Callback = None) -> Execution:
        """Runs a cell in this session."""
        request = _common.execute_request(code, language=None, session_id=self.id, timeout=timeout,
                                          cpu_timeout=cpu_timeout, memory_mb=None,
                                          output_bytes=output_bytes, files=None)
        return await self.client._execute(
            request, _common.StreamCallbacks(on_stdout, on_stderr, on_result, on_error), timeout)

    async def info(self) -> SessionInfo:
        return await self.client.get_session(self.id)

    async def update_network(self, network: Optional[Network]) -> SessionInfo:
        """Replaces the session's network policy; see warden.Session.update_network."""
        request = pb.UpdateNetworkRequest(session_id=self.id)
        if network is not None:
            request.network.CopyFrom(network.to_proto())
        return SessionInfo.from_proto(await self.client._unary("UpdateNetwork", request))

    async def interrupt(self) -> bool:
        """Stops the running cell; False when nothing ran."""
        response = await self.client._unary("InterruptSession", pb.InterruptSessionRequest(session_id=self.id))
        return response.was_busy

    async def restart(self, keep_files: bool = True) -> SessionInfo:
        """A fresh interpreter; the workspace is kept unless keep_files is False."""
        return SessionInfo.from_proto(await self.client._unary(
            "RestartSession", pb.RestartSessionRequest(session_id=self.id, clear_workspace=not keep_files)))

    async def close(self) -> None:
        """Closes the session on the server. Idempotent."""
        if self._closed:
            return
        await self.client._unary("CloseSession", pb.CloseSessionRequest(session_id=self.id))
        self._closed = True

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.close()
        except NotFound:
            self._closed = True

    def __repr__(self) -> str:
        return "warden.AsyncSession(%r, %s%s)" % (self.id, self.language, ", closed" if self._closed else "")
