"""An OpenAI Agents SDK function tool that runs code in Warden.

    from agents import Agent, Runner
    from warden.integrations.openai_agents import warden_function_tool
    agent = Agent(name="analyst", tools=[warden_function_tool(warden.AsyncClient())])
    result = await Runner.run(agent, "What is 2**100?")

Made with agents.function_tool(func, name_override=..., description_override=...),
which reads the parameters from the function's signature and docstring.
The tool is a coroutine over warden.AsyncClient (or AsyncSession, to keep
state between calls); a blocking warden.Client also works. It returns the
execution as text; when the code produced images (a plot), a list of
ToolOutputText and ToolOutputImage (a data: URL), which Responses models
see and Chat Completions models get as the text alone. Tested against the
Agents SDK itself (tests/python_package/frameworks); for Warden as an MCP
server of an agent, see docs/integrations.md.
"""
from __future__ import annotations

import base64
from typing import Any, Optional

from warden.integrations._text import execution_text

DESCRIPTION = ("Run {language} code in an isolated sandbox (no network). Returns stdout, stderr, "
               "the value of the last expression, and any error with its traceback.{state}")


def warden_function_tool(client: Any, session: Any = None, *, language: str = "python",
                         name: str = "run_code", timeout: Optional[float] = None) -> Any:
    """A FunctionTool `name(code: str)`; state persists when `session` is given."""
    from agents import ToolOutputImage, ToolOutputText, function_tool

    import warden

    language = session.language if session is not None else language
    blocking = isinstance(client, warden.Client)

    async def run_code(code: str) -> Any:
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
        text = execution_text(execution)
        images = [ToolOutputImage(image_url="data:%s;base64,%s" % (mime, base64.b64encode(data).decode()))
                  for r in execution.results
                  for mime, data in (("image/png", r.png), ("image/jpeg", r.jpeg)) if data is not None]
        return [ToolOutputText(text=text)] + images if images else text

    state = " Variables persist between calls." if session is not None else " Each call starts fresh."
    return function_tool(run_code, name_override=name,
                         description_override=DESCRIPTION.format(language=language, state=state))
