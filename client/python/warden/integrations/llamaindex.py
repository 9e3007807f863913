"""LlamaIndex tools that run code in Warden, in place of
CodeInterpreterToolSpec (which runs it on the host, unsandboxed).

    from llama_index.core.agent.workflow import CodeActAgent, FunctionAgent
    from warden.integrations.llamaindex import WardenToolSpec
    spec = WardenToolSpec(warden.Client(), keep_state=True)
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=llm)          # a code_interpreter tool
    agent = CodeActAgent(code_execute_fn=spec.code_execute_fn, llm=llm)  # or CodeAct's executor

Follows llama_index.core.tools.tool_spec.base.BaseToolSpec: spec_functions
names the methods that become tools. code_interpreter(code) returns the
execution as text, and with it each image the code produced (a plot) as an
ImageBlock, which LlamaIndex passes to the model. code_execute_fn is the
coroutine CodeActAgent calls with the code of each <execute> block. With
keep_state=True the spec holds one session, closed by close(): variables and
files persist between calls. Tested against LlamaIndex itself
(tests/python_package/frameworks).
"""
from __future__ import annotations

from typing import Any, Optional

from warden.integrations._lazy import lazy_attribute


def _build() -> Any:
    import asyncio

    from llama_index.core.base.llms.types import ImageBlock, TextBlock
    from llama_index.core.tools.tool_spec.base import BaseToolSpec

    import warden
    from warden.integrations._text import execution_text

    class WardenToolSpec(BaseToolSpec):  # type: ignore[misc, valid-type]
        """code_interpreter(code) over a warden.Client; session: the kept session, or None."""

        spec_functions = ["code_interpreter"]

        def __init__(self, client: Optional[warden.Client] = None, *, language: str = "python",
                     keep_state: bool = False, timeout: Optional[float] = None) -> None:
            self.client = client or warden.Client()
            self.language = language
            self.timeout = timeout
            self.session = self.client.session(language, labels={"client": "llamaindex"}) if keep_state else None

        def _run(self, code: str) -> Any:
            if self.session is not None:
                return self.session.run(code, timeout=self.timeout)
            return self.client.run(code, self.language, timeout=self.timeout)

        def code_interpreter(self, code: str) -> Any:
            """Run code in an isolated sandbox with no network, and return its output: stdout,
            stderr, the value of the last expression, and any error with its traceback."""
            execution = self._run(code)
            text = execution_text(execution)
            images = [ImageBlock(image=r.png if r.png is not None else r.jpeg,
                                 image_mimetype="image/png" if r.png is not None else "image/jpeg")
                      for r in execution.results if r.png is not None or r.jpeg is not None]
            return [TextBlock(text=text)] + images if images else text

        async def code_execute_fn(self, code: str) -> str:
            """CodeActAgent's executor: the execution as text."""
            execution = await asyncio.get_running_loop().run_in_executor(None, self._run, code)
            return execution_text(execution)

        def close(self) -> None:
            if self.session is not None:
                self.session.close()
                self.session = None

    return WardenToolSpec


__getattr__ = lazy_attribute("WardenToolSpec", _build)
