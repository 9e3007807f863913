"""LlamaIndex (llama-index-core) with Warden: its CodeActAgent with
WardenToolSpec.code_execute_fn as the code executor, and its FunctionAgent
calling WardenToolSpec's code_interpreter tool; the model is LlamaIndex's
own MockFunctionCallingLLM playing scripted replies (and tool calls) from a
response generator that records what it is sent."""
import asyncio

from llama_index.core.agent.workflow import CodeActAgent, FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM


def scripted(replies):
    """A MockFunctionCallingLLM answering with `replies` in turn; .seen holds each request's text."""
    replies = iter(replies)
    seen = []

    def respond(messages, **kwargs):
        seen.append("\n".join(str(m.content) for m in messages))
        reply = next(replies)
        return reply if isinstance(reply, ChatMessage) else ChatMessage(role="assistant", content=reply)
    llm = MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)
    return llm, seen


async def run_agent(agent, task):
    handler = agent.run(task)
    tool_results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    return await handler, tool_results


def test_a_codeact_agent_executes_in_a_warden_session(client):
    from warden.integrations.llamaindex import WardenToolSpec
    spec = WardenToolSpec(client, keep_state=True, timeout=60)
    try:
        spec.session.files.write("numbers.txt", "3\n4\n5\n")
        llm, seen = scripted([
            "Reading the numbers.\n<execute>\nnums = [int(x) for x in open('numbers.txt')]\nprint(sum(nums))\n</execute>",
            "<execute>\nprint(mean(nums))\n</execute>",
            "<execute>\nfrom statistics import mean\nprint(mean(nums))\n"
            "with open('mean.txt', 'w') as f:\n    f.write(str(mean(nums)))\n</execute>",
            "The sum is 12 and the mean is 4.",
        ])
        agent = CodeActAgent(code_execute_fn=spec.code_execute_fn, llm=llm)
        response, results = asyncio.run(run_agent(agent, "Sum and average numbers.txt"))
        outputs = [r.tool_output.content for r in results]
        assert outputs[0] == "12"
        assert "NameError" in outputs[1] and "NameError" in seen[2], "the error reached the model"
        assert outputs[2] == "4"  # nums from the first step
        assert str(response) == "The sum is 12 and the mean is 4."
        assert spec.session.files.read("mean.txt") == b"4"
    finally:
        spec.close()


def test_a_function_agent_calls_the_code_interpreter_tool(client):
    from warden.integrations.llamaindex import WardenToolSpec
    spec = WardenToolSpec(client, keep_state=True, timeout=60)
    try:
        [tool] = spec.to_tool_list()
        assert tool.metadata.name == "code_interpreter" and "sandbox" in tool.metadata.description

        def calls(code, n):
            return ChatMessage(role="assistant", blocks=[
                ToolCallBlock(tool_call_id="c%d" % n, tool_name="code_interpreter", tool_kwargs={"code": code})])
        llm, seen = scripted([
            calls("k = 3\nk * 2", 1),
            calls("import matplotlib.pyplot as plt\nplt.plot([k, k * 2])\nplt.show()\nprint('plotted', k)", 2),
            "k is 3; the plot is drawn.",
        ])
        agent = FunctionAgent(tools=[tool], llm=llm)
        response, results = asyncio.run(run_agent(agent, "Set k and plot it"))
        assert results[0].tool_output.content == "6"
        assert "6" in seen[1]
        plot = results[1].tool_output
        assert "plotted 3" in plot.content
        [image] = [b for b in plot.blocks if isinstance(b, ImageBlock)]
        assert image.image_mimetype == "image/png"
        assert str(response) == "k is 3; the plot is drawn."
    finally:
        spec.close()
    one_shot = WardenToolSpec(client).code_interpreter("print('StdOut')")
    assert one_shot == "StdOut"
