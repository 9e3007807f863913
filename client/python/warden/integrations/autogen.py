"""An AutoGen CodeExecutor backed by Warden sessions, one per language.

    from warden.integrations.autogen import WardenCodeExecutor
    executor = WardenCodeExecutor()        # a warden.AsyncClient from WARDEN_ADDR
    async with executor:                   # start() ... stop()
        result = await executor.execute_code_blocks([CodeBlock(code="print(1)", language="python")],
                                                    CancellationToken())

Follows autogen_core.code_executor.CodeExecutor: execute_code_blocks(
code_blocks, cancellation_token) -> CodeResult(exit_code, output), start(),
stop(), restart(). Blocks run in order and stop at the first failure, as
AutoGen's own executors do; exit_code is 0, the bash status, 124 for a
timeout, or 1. A cancelled token cancels the running cell. Not run against
AutoGen itself: it is not installable where Warden is built.
"""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

from warden.integrations._lazy import lazy_attribute

# AutoGen's language names -> Warden's.
_LANGUAGES = {"python": "python", "py": "python", "python3": "python", "bash": "bash", "sh": "bash",
              "shell": "bash", "javascript": "javascript", "js": "javascript"}


def exit_code(execution: Any) -> int:
    if execution.ok:
        return 0
    if execution.outcome in ("WALL_TIMEOUT", "CPU_TIMEOUT"):
        return 124  # what `timeout` returns, as DockerCommandLineCodeExecutor reports it
    return execution.exit_code if execution.exit_code > 0 else 1


def _build() -> Any:
    from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult

    import warden
    from warden.integrations._text import execution_text

    class WardenCodeExecutor(CodeExecutor):  # type: ignore[misc, valid-type]
        """Runs AutoGen code blocks in Warden sessions that live from start() to stop()."""

        def __init__(self, client: Optional[warden.AsyncClient] = None, timeout: Optional[float] = None,
                     **session_options: Any) -> None:
            self._owns_client = client is None  # then stop() closes it
            self.client = client or warden.AsyncClient()
            self.timeout = timeout
            self._session_options = session_options
            self._sessions: Dict[str, warden.AsyncSession] = {}

        async def _session(self, language: str) -> "warden.AsyncSession":
            if language not in self._sessions:
                self._sessions[language] = await self.client.session(
                    language, labels={"client": "autogen"}, **self._session_options)
            return self._sessions[language]

        async def execute_code_blocks(self, code_blocks: List[CodeBlock], cancellation_token: Any) -> CodeResult:
            outputs: List[str] = []
            for block in code_blocks:
                language = _LANGUAGES.get(block.language.lower())
                if language is None:
                    return CodeResult(exit_code=1, output="\n".join(
                        outputs + ["unsupported language %r: use python, bash or javascript" % block.language]))
                session = await self._session(language)
                run = asyncio.ensure_future(session.run(block.code, timeout=self.timeout))
                if cancellation_token is not None and hasattr(cancellation_token, "link_future"):
                    cancellation_token.link_future(run)
                execution = await run
                outputs.append(execution_text(execution))
                if not execution.ok:
                    return CodeResult(exit_code=exit_code(execution), output="\n".join(outputs))
            return CodeResult(exit_code=0, output="\n".join(outputs))

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

    return WardenCodeExecutor


__getattr__ = lazy_attribute("WardenCodeExecutor", _build)
