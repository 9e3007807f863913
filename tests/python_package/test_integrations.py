"""warden.integrations against stand-ins of the frameworks (the classes and
functions each adapter imports, with the documented names and signatures;
the frameworks themselves are not installable here), with a real wardend
behind them."""
import abc
import asyncio
import dataclasses
import inspect
import json
import subprocess
import sys
import types

import pytest

import warden


def module(name, **attributes):
    m = types.ModuleType(name)
    m.__dict__.update(attributes)
    return m


# -- smolagents (src/smolagents/remote_executors.py, local_python_executor.py, utils.py)

@dataclasses.dataclass
class CodeOutput:
    output: object
    logs: str
    is_final_answer: bool


class AgentError(Exception):
    def __init__(self, message, logger):
        super().__init__(message)
        self.message = message


class RemotePythonExecutor(abc.ABC):
    FINAL_ANSWER_EXCEPTION = "FinalAnswerException"

    def __init__(self, additional_imports, logger, allow_pickle=False):
        self.additional_imports, self.logger, self.allow_pickle = additional_imports, logger, allow_pickle

    @abc.abstractmethod
    def run_code_raise_errors(self, code):
        ...

    @staticmethod
    def _deserialize_final_answer(value, allow_pickle):
        assert value.startswith("safe:")
        return json.loads(value[len("safe:"):])

    def send_variables(self, variables):
        self.run_code_raise_errors("locals().update(%r)" % (variables,))

    def __call__(self, code_action):
        return self.run_code_raise_errors(code_action)


# -- AutoGen (autogen_core/code_executor/_base.py)

@dataclasses.dataclass
class CodeBlock:
    code: str
    language: str


@dataclasses.dataclass
class CodeResult:
    exit_code: int
    output: str


class CodeExecutor(abc.ABC):
    @abc.abstractmethod
    async def execute_code_blocks(self, code_blocks, cancellation_token): ...

    @abc.abstractmethod
    async def start(self): ...

    @abc.abstractmethod
    async def stop(self): ...

    @abc.abstractmethod
    async def restart(self): ...

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.stop()


class CancellationToken:
    def __init__(self):
        self.linked = []

    def link_future(self, future):
        self.linked.append(future)
        return future


# -- LangChain (langchain_core.tools.StructuredTool)

class StructuredTool:
    def __init__(self, name, description, func, coroutine):
        self.name, self.description, self.func, self.coroutine = name, description, func, coroutine
        self.args = list(inspect.signature(func or coroutine).parameters)

    @classmethod
    def from_function(cls, func=None, coroutine=None, name=None, description=None, **kwargs):
        return cls(name or (func or coroutine).__name__, description, func, coroutine)

    def invoke(self, tool_input):
        return self.func(**tool_input)

    async def ainvoke(self, tool_input):
        return await self.coroutine(**tool_input)


# -- LlamaIndex (llama_index.core.tools.tool_spec.base.BaseToolSpec)

class FunctionTool:
    def __init__(self, fn, name, description):
        self.fn, self.name, self.description = fn, name, description

    def call(self, **kwargs):
        return self.fn(**kwargs)


class BaseToolSpec:
    spec_functions = []

    def to_tool_list(self):
        return [FunctionTool(getattr(self, n), n, inspect.getdoc(getattr(self, n))) for n in self.spec_functions]


# -- OpenAI Agents SDK (agents.function_tool -> FunctionTool with on_invoke_tool(ctx, input_json))

class AgentsFunctionTool:
    def __init__(self, func, name, description):
        self.name, self.description, self.func = name, description, func
        self.params = list(inspect.signature(func).parameters)

    async def on_invoke_tool(self, ctx, input_json):
        result = self.func(**json.loads(input_json))
        return await result if inspect.isawaitable(result) else result


def function_tool(func, *, name_override=None, description_override=None):
    return AgentsFunctionTool(func, name_override or func.__name__, description_override or func.__doc__)


@pytest.fixture(scope="module", autouse=True)
def frameworks():
    stand_ins = {
        "smolagents": module("smolagents"),
        "smolagents.local_python_executor": module("smolagents.local_python_executor", CodeOutput=CodeOutput),
        "smolagents.remote_executors": module("smolagents.remote_executors",
                                              RemotePythonExecutor=RemotePythonExecutor),
        "smolagents.utils": module("smolagents.utils", AgentError=AgentError),
        "autogen_core": module("autogen_core", CancellationToken=CancellationToken),
        "autogen_core.code_executor": module("autogen_core.code_executor", CodeBlock=CodeBlock,
                                             CodeExecutor=CodeExecutor, CodeResult=CodeResult),
        "langchain_core": module("langchain_core"),
        "langchain_core.tools": module("langchain_core.tools", StructuredTool=StructuredTool),
        "llama_index": module("llama_index"),
        "llama_index.core": module("llama_index.core"),
        "llama_index.core.tools": module("llama_index.core.tools"),
        "llama_index.core.tools.tool_spec": module("llama_index.core.tools.tool_spec"),
        "llama_index.core.tools.tool_spec.base": module("llama_index.core.tools.tool_spec.base",
                                                        BaseToolSpec=BaseToolSpec),
        "agents": module("agents", function_tool=function_tool),
    }
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    yield
    for name, old in saved.items():
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


def test_the_adapters_import_their_framework_only_when_used():
    """Without the frameworks (a fresh interpreter, no stand-ins): importing works, using says what is missing."""
    script = "\n".join([
        "import importlib",
        "for module, name, framework in [('smolagents', 'WardenExecutor', 'smolagents'),",
        "                                ('autogen', 'WardenCodeExecutor', 'autogen_core'),",
        "                                ('llamaindex', 'WardenToolSpec', 'llama_index'),",
        "                                ('langchain', 'warden_tool', 'langchain_core'),",
        "                                ('openai_agents', 'warden_function_tool', 'agents')]:",
        "    adapter = importlib.import_module('warden.integrations.' + module)",
        "    try:",
        "        thing = getattr(adapter, name)",
        "        if callable(thing) and not isinstance(thing, type): thing(None)",
        "        raise SystemExit('%s worked without %s' % (name, framework))",
        "    except ModuleNotFoundError as e:",
        "        assert e.name == framework, (e.name, framework)",
        "print('lazy')",
    ])
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "lazy\n", run.stderr


def test_smolagents_executor_keeps_state_reports_errors_and_the_final_answer(client):
    from warden.integrations.smolagents import WardenExecutor
    executor = WardenExecutor(["json", "math"], logger=None, client=client, timeout=30)
    assert isinstance(executor, RemotePythonExecutor)
    try:
        out = executor("x = 6 * 7\nprint('computed')\nx")
        assert (out.output, out.logs, out.is_final_answer) == ("42", "computed\n", False)
        executor.send_variables({"y": 8})
        assert executor("x + y").output == "50"
        with pytest.raises(AgentError, match="ZeroDivisionError") as raised:
            executor("print('before')\n1 / 0")
        assert "before" in raised.value.message and "Traceback" in raised.value.message
        final = executor("class FinalAnswerException(Exception):\n    pass\n"
                         "raise FinalAnswerException('safe:' + __import__('json').dumps({'answer': x}))")
        assert (final.output, final.is_final_answer) == ({"answer": 42}, True)
        # Installed with the session's pip, as smolagents does: without a
        # wheelhouse, what the runtime lacks fails at once and says why.
        with pytest.raises(AgentError, match="pip install failed") as refused:
            WardenExecutor(["no_such_module_here"], logger=None, client=client)
        assert "wheelhouse" in refused.value.message
    finally:
        executor.cleanup()
    with pytest.raises(warden.NotFound):
        client.attach(executor.session.id)


def test_smolagents_executor_reports_a_timeout_as_an_agent_error(client):
    from warden.integrations.smolagents import WardenExecutor
    executor = WardenExecutor([], logger=None, client=client, timeout=1)
    try:
        with pytest.raises(AgentError, match="WALL_TIMEOUT"):
            executor("while True: pass")
        assert executor("'still alive'").output == "'still alive'"
    finally:
        executor.cleanup()


def test_autogen_executor_runs_blocks_in_order_and_stops_at_the_first_failure(wardend):
    from warden.integrations.autogen import WardenCodeExecutor

    async def main():
        async with WardenCodeExecutor(timeout=30) as executor:
            assert isinstance(executor, CodeExecutor)
            token = CancellationToken()
            ok = await executor.execute_code_blocks(
                [CodeBlock("x = 40\nprint(x)", "python"), CodeBlock("echo from-bash", "sh"),
                 CodeBlock("print(x + 2)", "python")], token)
            assert (ok.exit_code, ok.output) == (0, "40\nfrom-bash\n42"), ok
            assert len(token.linked) == 3
            failed = await executor.execute_code_blocks(
                [CodeBlock("echo one; exit 3", "bash"), CodeBlock("print('never')", "python")], token)
            assert failed.exit_code == 3 and "never" not in failed.output, failed
            raised = await executor.execute_code_blocks([CodeBlock("1 / 0", "python")], token)
            assert raised.exit_code == 1 and "ZeroDivisionError" in raised.output
            unknown = await executor.execute_code_blocks([CodeBlock("x", "cobol")], token)
            assert unknown.exit_code == 1 and "unsupported language" in unknown.output
            await executor.restart()
            gone = await executor.execute_code_blocks([CodeBlock("x", "python")], token)
            assert "NameError" in gone.output
            sessions = [s.id for s in executor._sessions.values()]
        async with warden.AsyncClient() as check:
            for session_id in sessions:
                with pytest.raises(warden.NotFound):
                    await check.attach(session_id)
    asyncio.run(main())


def test_langchain_tool_one_shot_and_in_a_session(client, wardend):
    from warden.integrations.langchain import warden_tool
    tool = warden_tool(client)
    assert (tool.name, tool.args) == ("run_code", ["code"]) and "fresh" in tool.description
    assert tool.invoke({"code": "print('hi')\n6 * 7"}) == "hi\n42"
    assert "ZeroDivisionError" in tool.invoke({"code": "1/0"})
    with client.session("bash") as s:
        stateful = warden_tool(client, s, name="shell")
        stateful.invoke({"code": "X=5"})
        assert stateful.invoke({"code": "echo $X"}) == "5" and "persist" in stateful.description

    async def main():
        async with warden.AsyncClient() as aclient:
            return await warden_tool(aclient).ainvoke({"code": "print(1 + 1)"})
    assert asyncio.run(main()) == "2"


def test_llamaindex_tool_spec(client):
    from warden.integrations.llamaindex import WardenToolSpec
    [tool] = WardenToolSpec(client).to_tool_list()
    assert tool.name == "code_interpreter" and "sandbox" in tool.description
    assert tool.call(code="print('StdOut')") == "StdOut"
    spec = WardenToolSpec(client, keep_state=True)
    try:
        [stateful] = spec.to_tool_list()
        stateful.call(code="k = 3")
        assert stateful.call(code="k * 2") == "6"
    finally:
        spec.close()


def test_openai_agents_function_tool_async_and_blocking(client, wardend):
    from warden.integrations.openai_agents import warden_function_tool

    async def main():
        async with warden.AsyncClient() as aclient:
            tool = warden_function_tool(aclient)
            assert (tool.name, tool.params) == ("run_code", ["code"]) and "sandbox" in tool.description
            assert await tool.on_invoke_tool(None, json.dumps({"code": "print(3 * 3)"})) == "9"
            async with aclient.session() as s:
                stateful = warden_function_tool(aclient, s)
                await stateful.on_invoke_tool(None, '{"code": "z = 1"}')
                assert await stateful.on_invoke_tool(None, '{"code": "z + 1"}') == "2"
        blocking = warden_function_tool(client, language="bash")
        assert await blocking.on_invoke_tool(None, '{"code": "echo blocking"}') == "blocking"
    asyncio.run(main())
