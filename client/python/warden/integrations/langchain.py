"""A LangChain tool that runs code in Warden.

    from langgraph.prebuilt import create_react_agent
    from warden.integrations.langchain import warden_tool
    with warden.Client() as client, client.session() as session:
        agent = create_react_agent(model, [warden_tool(client, session)])  # state persists
        agent.invoke({"messages": [("user", "...")]})

Made with langchain_core.tools.StructuredTool.from_function(func=...,
coroutine=..., name=..., description=..., response_format=
"content_and_artifact"): the model reads the execution as text (the
ToolMessage's content) and the program gets the whole warden.Execution as
the ToolMessage's artifact, with its results (plots as PNG bytes). With an
AsyncClient/AsyncSession the tool is async (ainvoke). Tested against
LangChain and LangGraph themselves (tests/python_package/frameworks).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from warden.integrations._text import execution_text

DESCRIPTION = ("Run {language} code in an isolated sandbox (no network) and get back its output, "
               "the value of the last expression, and any error with its traceback.{state}")


def warden_tool(client: Any, session: Any = None, *, language: str = "python", name: str = "run_code",
                timeout: Optional[float] = None) -> Any:
    """A StructuredTool `name(code: str)`; state persists when `session` is given."""
    from langchain_core.tools import StructuredTool

    import warden

    language = session.language if session is not None else language
    description = DESCRIPTION.format(language=language, state=" Variables persist between calls."
                                     if session is not None else " Each call starts fresh.")
    if isinstance(client, warden.AsyncClient):
        async def arun_code(code: str) -> Tuple[str, Any]:
            if session is not None:
                execution = await session.run(code, timeout=timeout)
            else:
                execution = await client.run(code, language, timeout=timeout)
            return execution_text(execution), execution

        return StructuredTool.from_function(coroutine=arun_code, name=name, description=description,
                                            response_format="content_and_artifact")

    def run_code(code: str) -> Tuple[str, Any]:
        if session is not None:
            execution = session.run(code, timeout=timeout)
        else:
            execution = client.run(code, language, timeout=timeout)
        return execution_text(execution), execution

    return StructuredTool.from_function(func=run_code, name=name, description=description,
                                        response_format="content_and_artifact")
