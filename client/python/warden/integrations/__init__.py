"""Thin adapters that put Warden behind agent frameworks' code-execution hooks.

Each module imports its framework only when its adapter is first used, so
`import warden` never needs them:

- warden.integrations.smolagents: WardenExecutor, a smolagents RemotePythonExecutor
- warden.integrations.autogen: WardenCodeExecutor, an AutoGen CodeExecutor
- warden.integrations.langchain: warden_tool(), a LangChain StructuredTool
- warden.integrations.llamaindex: WardenToolSpec, a LlamaIndex BaseToolSpec (and CodeActAgent executor)
- warden.integrations.openai_agents: warden_function_tool(), an OpenAI Agents SDK FunctionTool

Each is tested against its framework's real classes, with the framework's
own agent loop calling a real wardend (tests/python_package/frameworks,
the versions in tests/pypi/requirements.txt; docs/integrations.md).
"""
from warden.integrations._text import execution_text

__all__ = ["execution_text"]
