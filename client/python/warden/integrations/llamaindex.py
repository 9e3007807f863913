"""A LlamaIndex tool spec that runs code in Warden, in place of
CodeInterpreterToolSpec (which runs it on the host, unsandboxed).

    from warden.integrations.llamaindex import WardenToolSpec
    tools = WardenToolSpec(warden.Client()).to_tool_list()   # [FunctionTool code_interpreter]

Follows llama_index.core.tools.tool_spec.base.BaseToolSpec: spec_functions
names the methods that become tools. With keep_state=True the spec holds
one session, closed by close(). Not run against LlamaIndex itself: it is
not installable where Warden is built.
"""
from __future__ import annotations

from typing import Any, Optional

from warden.integrations._lazy import lazy_attribute


def _build() -> Any:
    from llama_index.core.tools.tool_spec.base import BaseToolSpec

    import warden
    from warden.integrations._text import execution_text

    class WardenToolSpec(BaseToolSpec):  # type: ignore[misc, valid-type]
        """code_interpreter(code) -> str over a warden.Client."""

        spec_functions = ["code_interpreter"]

        def __init__(self, client: Optional[warden.Client] = None, *, language: str = "python",
                     keep_state: bool = False, timeout: Optional[float] = None) -> None:
            self.client = client or warden.Client()
            self.language = language
            self.timeout = timeout
            self.session = self.client.session(language, labels={"client": "llamaindex"}) if keep_state else None

        def code_interpreter(self, code: str) -> str:
            """Run code in an isolated sandbox with no network, and return its output: stdout,
            stderr, the value of the last expression, and any error with its traceback."""
            if self.session is not None:
                return execution_text(self.session.run(code, timeout=self.timeout))
            return execution_text(self.client.run(code, self.language, timeout=self.timeout))

        def close(self) -> None:
            if self.session is not None:
                self.session.close()
                self.session = None

    return WardenToolSpec


__getattr__ = lazy_attribute("WardenToolSpec", _build)
