"""Thin adapters that put Warden behind agent frameworks' code-execution hooks.

Each module imports its framework only when its adapter is first used, so
`import warden` never needs them:

- warden.integrations.smolagents: WardenExecutor, a smolagents RemotePythonExecutor
- warden.integrations.autogen: WardenCodeExecutor, an AutoGen CodeExecutor
- warden.integrations.langchain: warden_tool(), a LangChain StructuredTool
- warden.integrations.llamaindex: WardenToolSpec, a LlamaIndex BaseToolSpec
- warden.integrations.openai_agents: warden_function_tool(), an OpenAI Agents SDK FunctionTool

They follow the frameworks' documented interfaces and are tested against
stand-ins with the same names over a real wardend, not against the
frameworks themselves (those are not installable where Warden is built).
"""
from warden.integrations._text import execution_text

__all__ = ["execution_text"]
