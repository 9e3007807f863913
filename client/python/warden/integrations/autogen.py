"""An AutoGen CodeExecutor backed by Warden sessions, one per language.

    from autogen_agentchat.agents import CodeExecutorAgent
    from warden.integrations.autogen import WardenCodeExecutor
    executor = WardenCodeExecutor()        # a warden.AsyncClient from WARDEN_ADDR
    agent = CodeExecutorAgent("coder", code_executor=executor, model_client=model_client)

Follows autogen_core.code_executor.CodeExecutor: execute_code_blocks(
code_blocks, cancellation_token) -> CodeResult, start(), stop(), restart().
Blocks run in order and stop at the first failure, as AutoGen's own
executors do; exit_code is 0, the bash status, 124 for a timeout, or 1. The
result is a WardenCodeResult: a CodeResult that also lists output_files,
the plots (PNG, JPEG, SVG results) saved into output_dir, as
autogen-ext's Jupyter executors do. A cancelled token cancels the running
cell. Tested against AutoGen itself (tests/python_package/frameworks).
"""
from __future__ import annotations

import asyncio
import pathlib
import tempfile
import uuid
from typing import Any, Dict, List, Optional, Union

from warden.integrations._lazy import lazy_attribute

# AutoGen's language names -> Warden's.
_LANGUAGES = {"python": "python", "py": "python", "python3": "python", "bash": "bash", "sh": "bash",
              "shell": "bash", "javascript": "javascript", "js": "javascript"}
_IMAGES = (("png", "image/png"), ("jpeg", "image/jpeg"), ("svg", "image/svg+xml"))


def exit_code(execution: Any) -> int:
    if execution.ok:
        return 0
    if execution.outcome in ("WALL_TIMEOUT", "CPU_TIMEOUT"):
        return 124  # what `timeout` returns, as DockerCommandLineCodeExecutor reports it
    return execution.exit_code if execution.exit_code > 0 else 1


def _build() -> Any:
    import dataclasses

    from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult

    import warden
    from warden.integrations._text import execution_text

    @dataclasses.dataclass
    class WardenCodeResult(CodeResult):  # type: ignore[misc, valid-type]
        """A CodeResult with the images the code produced, saved as files."""

        output_files: List[pathlib.Path] = dataclasses.field(default_factory=list)

    class WardenCodeExecutor(CodeExecutor):  # type: ignore[misc, valid-type]
        """Runs AutoGen code blocks in Warden sessions that live from first use to stop().

        client: a warden.AsyncClient (default: a new one, closed by stop());
        timeout: each cell's wall-clock limit in seconds; output_dir: where
        images are saved (default: a temporary directory); session_options
        go to AsyncClient.session (memory_mb, ttl, ...).
        """

        def __init__(self, client: Optional[warden.AsyncClient] = None, timeout: Optional[float] = None,
                     output_dir: Union[str, pathlib.Path, None] = None, **session_options: Any) -> None:
            self._owns_client = client is None  # then stop() closes it
            self.client = client or warden.AsyncClient()
            self.timeout = timeout
            self.output_dir = pathlib.Path(output_dir or tempfile.mkdtemp(prefix="warden-autogen-"))
            self._session_options = session_options
            self._sessions: Dict[str, warden.AsyncSession] = {}

        async def session(self, language: str = "python") -> "warden.AsyncSession":
            """The session that runs `language` blocks, created on first use (for files)."""
            if language not in self._sessions:
                self._sessions[language] = await self.client.session(
                    language, labels={"client": "autogen"}, **self._session_options)
            return self._sessions[language]

        def _save_images(self, execution: Any) -> List[pathlib.Path]:
            files = []
            for result in execution.results:
                for extension, mime in _IMAGES:
                    data = result.data.get(mime)
                    if data is None:
                        continue
                    path = self.output_dir / ("%s.%s" % (uuid.uuid4().hex, extension))
                    path.write_bytes(data if isinstance(data, bytes) else data.encode())  # svg is text
                    files.append(path)
            return files

        async def execute_code_blocks(self, code_blocks: List[CodeBlock], cancellation_token: Any) -> Any:
            outputs: List[str] = []
            files: List[pathlib.Path] = []
            for block in code_blocks:
                language = _LANGUAGES.get(block.language.lower())
                if language is None:
                    return WardenCodeResult(exit_code=1, output="\n".join(
                        outputs + ["unsupported language %r: use python, bash or javascript" % block.language]),
                        output_files=files)
                session = await self.session(language)
                run = asyncio.ensure_future(session.run(block.code, timeout=self.timeout))
                if cancellation_token is not None:
                    cancellation_token.link_future(run)
                execution = await run
                outputs.append(execution_text(execution))
                files += self._save_images(execution)
                if not execution.ok:
                    return WardenCodeResult(exit_code=exit_code(execution), output="\n".join(outputs),
                                            output_files=files)
            return WardenCodeResult(exit_code=0, output="\n".join(outputs), output_files=files)

        async def start(self) -> None:
            """Sessions are created on first use."""

        async def stop(self) -> None:
            sessions, self._sessions = list(self._sessions.values()), {}
            for session in sessions:
                try:
                    await session.close()
                except warden.NotFound:
                    pass
            if self._owns_client:
                await self.client.close()

        async def restart(self) -> None:
            for session in self._sessions.values():
                await session.restart(keep_files=True)

    WardenCodeExecutor.Result = WardenCodeResult
    return WardenCodeExecutor


__getattr__ = lazy_attribute("WardenCodeExecutor", _build)
