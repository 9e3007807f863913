"""A LangChain tool that runs code in Warden.

    from warden.integrations.langchain import warden_tool
    tool = warden_tool(warden.Client(), session=None)   # one-shot; pass a Session to keep state
    tool.invoke({"code": "print(6 * 7)"})

Made with langchain_core.tools.StructuredTool.from_function(func=...,
coroutine=..., name=..., description=...), which infers the arguments'
schema from the function's signature. With an AsyncClient/AsyncSession the
tool is async (ainvoke). Not run against LangChain itself: it is not
installable where Warden is built.
"""
from __future__ import annotations

from typing import Any, Optional

from warden.integrations._text import execution_text

DESCRIPTION = ("Run {language} code in an isolated sandbox (no network) and get back its output, "
               "the value of the last expression, and any error with its traceback.{state}")


def warden_tool(client: Any, session: Any = None, *, language: str = "python", name: str = "run_code",
                timeout: Optional[float] = None) -> Any:
    """A StructuredTool `name(code: str) -> str`; state persists when `session` is given."""
    from langchain_core.tools import StructuredTool

    import warden

    language = session.language if session is not None else language
    description = DESCRIPTION.format(language=language, state=" Variables persist between calls."
                                     if session is not None else " Each call starts fresh.")
    if isinstance(client, warden.AsyncClient):
        async def arun_code(code: str) -> str:
            if session is not None:
                return execution_text(await session.run(code, timeout=timeout))
            return execution_text(await client.run(code, language, timeout=timeout))

        return StructuredTool.from_function(coroutine=arun_code, name=name, description=description)

    def run_code(code: str) -> str:
        if session is not None:
            return execution_text(session.run(code, timeout=timeout))
        return execution_text(client.run(code, language, timeout=timeout))

    return StructuredTool.from_function(func=run_code, name=name, description=description)
