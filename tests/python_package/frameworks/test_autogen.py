"""AutoGen (autogen-agentchat, autogen-core, autogen-ext) with Warden: its
CodeExecutorAgent generating code with AutoGen's own scripted model
(ReplayChatCompletionClient, recording what it is sent), running it through
warden.integrations.autogen.WardenCodeExecutor, retrying on an error, and
reflecting on the result; plus the executor's own contract."""
import asyncio

from autogen_agentchat.agents import CodeExecutorAgent
from autogen_agentchat.messages import CodeExecutionEvent
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor
from autogen_ext.models.replay import ReplayChatCompletionClient

import warden


# What CodeExecutorAgent's retries need of a model: structured output (its
# retry decision is a JSON object).
MODEL_INFO = {"vision": False, "function_calling": False, "json_output": True, "family": "unknown",
              "structured_output": True}


class RecordingReplayClient(ReplayChatCompletionClient):
    """AutoGen's replay client, keeping each request's messages."""

    def __init__(self, replies):
        super().__init__(replies, model_info=MODEL_INFO)
        self.requests = []

    async def create(self, messages, **kwargs):
        self.requests.append([str(getattr(m, "content", m)) for m in messages])
        return await super().create(messages, **kwargs)


def test_a_code_executor_agent_runs_fixes_and_reflects_on_warden(wardend, tmp_path):
    from warden.integrations.autogen import WardenCodeExecutor

    async def main():
        model = RecordingReplayClient([
            "```python\nx = 40\nopen('note.txt', 'w').write('from the agent')\n1 / 0\n```",
            '{"retry": true, "reason": "do not divide by zero; x is already set"}',
            "```python\nprint(x + 2)\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()\n```",
            "x + 2 is 42, and the plot shows squares.",
        ])
        async with WardenCodeExecutor(timeout=60, output_dir=tmp_path) as executor:
            agent = CodeExecutorAgent("coder", code_executor=executor, model_client=model, max_retries_on_error=1)
            events = [e async for e in agent.run_stream(task="Set x to 40 and print x + 2, then plot some squares.")]
            result = events[-1]  # the TaskResult; the events stream before it
            runs = [e.result for e in events if isinstance(e, CodeExecutionEvent)]
            assert [r.exit_code for r in runs] == [1, 0], runs
            assert "ZeroDivisionError" in runs[0].output
            assert runs[1].output.startswith("42")  # x survived the failed step
            assert any("ZeroDivisionError" in text for text in model.requests[1]), "the error reached the model"
            [png] = runs[1].output_files
            assert png.parent == tmp_path and png.read_bytes()[:4] == b"\x89PNG"
            assert result.messages[-1].content == "x + 2 is 42, and the plot shows squares."
            session = await executor.session()
            assert await session.files.read("note.txt") == b"from the agent"
            session_id = session.id
        async with warden.AsyncClient() as check:
            try:
                await check.attach(session_id)
                raise AssertionError("the session outlived the executor")
            except warden.NotFound:
                pass
    asyncio.run(main())


def test_the_executor_runs_blocks_in_order_and_stops_at_the_first_failure(wardend):
    from warden.integrations.autogen import WardenCodeExecutor

    async def main():
        async with WardenCodeExecutor(timeout=30) as executor:
            assert isinstance(executor, CodeExecutor)
            token = CancellationToken()
            ok = await executor.execute_code_blocks(
                [CodeBlock(code="x = 40\nprint(x)", language="python"), CodeBlock(code="echo from-bash", language="sh"),
                 CodeBlock(code="print(x + 2)", language="python")], token)
            assert (ok.exit_code, ok.output) == (0, "40\nfrom-bash\n42"), ok
            failed = await executor.execute_code_blocks(
                [CodeBlock(code="echo one; exit 3", language="bash"), CodeBlock(code="print('never')", language="python")],
                token)
            assert failed.exit_code == 3 and "never" not in failed.output, failed
            unknown = await executor.execute_code_blocks([CodeBlock(code="x", language="cobol")], token)
            assert unknown.exit_code == 1 and "unsupported language" in unknown.output
            slow = asyncio.ensure_future(executor.execute_code_blocks(
                [CodeBlock(code="import time; time.sleep(60)", language="python")], token))
            token.cancel()  # AutoGen's cancellation reaches the cell's call
            try:
                await slow
                raise AssertionError("not cancelled")
            except asyncio.CancelledError:
                pass
            await executor.restart()
            gone = await executor.execute_code_blocks([CodeBlock(code="x", language="python")], CancellationToken())
            assert "NameError" in gone.output
    asyncio.run(main())
