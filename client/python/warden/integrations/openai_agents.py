"""An OpenAI Agents SDK function tool that runs code in Warden.

    from agents import Agent
    from warden.integrations.openai_agents import warden_function_tool
    agent = Agent(name="analyst", tools=[warden_function_tool(warden.AsyncClient())])

Made with agents.function_tool(func, name_override=..., description_override=...),
which reads the parameters from the function's signature and docstring.
The tool is a coroutine over warden.AsyncClient (or AsyncSession, to keep
state between calls); a blocking warden.Client also works. Not run against
the Agents SDK itself: it is not installable where Warden is built.
"""
from __future__ import annotations

from typing import Any, Optional

from warden.integrations._text import execution_text

DESCRIPTION = ("Run {language} code in an isolated sandbox (no network). Returns stdout, stderr, "
               "the value of the last expression, and any error with its traceback.")


def warden_function_tool(client: Any, session: Any = None, *, language: str = "python",
                         name: str = "run_code", timeout: Optional[float] = None) -> Any:
    """A FunctionTool `name(code: str) -> str`; state persists when `session` is given."""
    from agents import function_tool

    import warden

    language = session.language if session is not None else language
    blocking = isinstance(client, warden.Client)

    async def run_code(code: str) -> str:
        """Run code in the sandbox and return what it printed, its value and any error.

        Args:
            code: the source code to run.
        """
        target = session if session is not None else client
        args = (code,) if session is not None else (code, language)
        if blocking:
            import asyncio
            execution = await asyncio.get_running_loop().run_in_executor(
                None, lambda: target.run(*args, timeout=timeout))
        else:
            execution = await target.run(*args, timeout=timeout)
        return execution_text(execution)

    return function_tool(run_code, name_override=name, description_override=DESCRIPTION.format(language=language))
