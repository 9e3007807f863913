"""The `py` blocks marked `# example: NAME` in docs/python.md and
docs/integrations.md run, each with a scripted model, and give the result
the scripted conversation leads to. A marked block without a test here
fails, so the docs cannot show code that no test runs."""
import asyncio
import os
import pathlib
import re

import pytest
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM

from conftest import E2B_KEY, TOKEN_MAIN, text_step

DOCS = pathlib.Path(os.environ["WARDEN_TESTS_DIR"]).parent / "docs"


def examples():
    found = {}
    for doc in ("python.md", "integrations.md"):
        for block in re.findall(r"^```py\n(.*?)^```", (DOCS / doc).read_text(), flags=re.S | re.M):
            match = re.match(r"# example: (\w+)\n", block)
            if match:
                found[match.group(1)] = (doc, block)
    return found


EXAMPLES = examples()


def load(name):
    doc, block = EXAMPLES[name]
    namespace = {"__name__": "example_" + name}
    exec(compile(block, "%s example %s" % (doc, name), "exec"), namespace)
    return namespace


def code(text):
    return text_step("Thought: compute it.\n<code>\n%s\n</code>" % text)


def tool_call(name, arguments):
    import json
    return {"content": "", "tool_calls": [{"name": name, "arguments": json.dumps(arguments)}]}


def openai_chat(model):
    from agents import OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI
    set_tracing_disabled(True)
    return OpenAIChatCompletionsModel(model="fake-model", openai_client=AsyncOpenAI(base_url=model.base_url,
                                                                                   api_key="unused"))


class ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


def run_smolagents(model, wardend, monkeypatch):
    from smolagents import OpenAIModel
    model.script([code("x = sum(range(10))\nprint(x)"), code("final_answer(x * 2)")])
    assert load("smolagents")["solve"](OpenAIModel(model_id="fake-model", api_base=model.base_url, api_key="-"),
                                       "twice the sum of 0..9") == 90


def run_smolagents_e2b(model, wardend, monkeypatch):
    from smolagents import OpenAIModel
    monkeypatch.setenv("E2B_API_URL", wardend.http_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", wardend.http_url)
    monkeypatch.setenv("E2B_API_KEY", E2B_KEY)
    model.script([code("import numpy as np\nv = np.arange(5)"), code("final_answer(int(v.sum()))")])
    assert load("smolagents_e2b")["solve"](OpenAIModel(model_id="fake-model", api_base=model.base_url,
                                                       api_key="-"), "sum of 0..4") == 10


def run_autogen(model, wardend, monkeypatch):
    client = ReplayChatCompletionClient(["```python\nprint(sum(range(4)))\n```", "The sum is 6."], model_info={
        "vision": False, "function_calling": False, "json_output": True, "family": "unknown",
        "structured_output": True})
    assert asyncio.run(load("autogen")["solve"](client, "sum 0..3")) == "The sum is 6."


def run_langchain(model, wardend, monkeypatch):
    fake = ToolCallingFake(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "run_code", "args": {"code": "n = 7"}, "id": "1"}]),
        AIMessage(content="", tool_calls=[{"name": "run_code", "args": {"code": "n * 6"}, "id": "2"}]),
        AIMessage(content="42")]))
    assert load("langchain")["solve"](fake, "what is 7 * 6") == "42"


def run_llamaindex(model, wardend, monkeypatch):
    replies = iter(["<execute>\nv = [1, 2, 3]\nprint(sum(v))\n</execute>", "The sum is 6."])
    llm = MockFunctionCallingLLM(response_generator=lambda messages, **kw: ChatMessage(
        role="assistant", content=next(replies)), is_chat_model=True)
    assert asyncio.run(load("llamaindex")["solve"](llm, "sum 1..3")) == "The sum is 6."


def run_openai_agents(model, wardend, monkeypatch):
    model.script([tool_call("run_code", {"code": "words = 'a b c'.split()\nlen(words)"}), text_step("3 words.")])
    assert asyncio.run(load("openai_agents")["solve"](openai_chat(model), "count the words")) == "3 words."


def run_openai_agents_mcp(model, wardend, monkeypatch):
    model.script([tool_call("execute_code", {"code": "print(2 ** 10)"}), text_step("1024")])
    solve = load("openai_agents_mcp")["solve"]
    assert asyncio.run(solve(openai_chat(model), "2 to the 10th", wardend.http_url + "/mcp", TOKEN_MAIN)) == "1024"
    assert "1024" in str(model.requests()[1]["body"]["messages"][-1]["content"])


def run_e2b(model, wardend, monkeypatch):
    monkeypatch.setenv("E2B_API_URL", wardend.http_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", wardend.http_url)
    monkeypatch.setenv("E2B_API_KEY", E2B_KEY)
    assert load("e2b")["analyse"]("a,b\n1,2\n3,4\n") == ("4", True)


def run_mcp(model, wardend, monkeypatch):
    monkeypatch.setenv("WARDEN_TOKEN", TOKEN_MAIN)
    namespace = load("mcp")
    assert asyncio.run(namespace["over_http"](wardend.http_url + "/mcp")) == "42\n"
    monkeypatch.setenv("PATH", os.environ["WARDEN_BIN_DIR"] + os.pathsep + os.environ["PATH"])
    assert asyncio.run(namespace["over_stdio"]()) == "42\n"


def run_jupyter(model, wardend, monkeypatch, open_wardend):
    assert asyncio.run(load("jupyter")["run_cell"](open_wardend.http_url, "6 * 7")) == "42"


RUNS = {name[len("run_"):]: fn for name, fn in globals().items() if name.startswith("run_")}


def test_every_marked_example_has_a_test():
    assert set(EXAMPLES) == set(RUNS), "examples without a test: %s; tests without an example: %s" % (
        sorted(set(EXAMPLES) - set(RUNS)), sorted(set(RUNS) - set(EXAMPLES)))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_example_runs(name, model, wardend, monkeypatch, request):
    run = RUNS[name]
    extra = [request.getfixturevalue("open_wardend")] if "open_wardend" in run.__code__.co_varnames else []
    run(model, wardend, monkeypatch, *extra)
