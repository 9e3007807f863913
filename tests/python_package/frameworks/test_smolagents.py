"""smolagents with Warden, both ways: a CodeAgent whose code runs in a Warden
session (warden.integrations.smolagents.WardenExecutor), and smolagents' own
E2B executor (executor_type="e2b"), unmodified, pointed at Warden's E2B front
by E2B's environment variables. smolagents has no scripted model of its own:
its OpenAIModel talks to the scripted OpenAI-compatible server
(tests/fake_openai_server.py, real HTTP), which records every request."""
import re

import PIL.Image
from smolagents import CodeAgent, OpenAIModel
from smolagents.memory import ActionStep

import warden
from conftest import text_step


def code_step(code, thought="Thought: the next step."):
    return text_step("%s\n<code>\n%s\n</code>" % (thought, code))


def openai_model(model):
    return OpenAIModel(model_id="fake-model", api_base=model.base_url, api_key="unused")


def action_steps(agent):
    return [s for s in agent.memory.steps if isinstance(s, ActionStep)]


def sent_to_the_model(request):
    return "\n".join(str(m.get("content")) for m in request["body"]["messages"])


# The agent's loop: a file goes in, state carries across steps, an error goes
# back to the model, a plot comes back, a file comes out, final_answer ends it.
SCRIPT = [
    code_step("import pandas as pd\ndf = pd.read_csv('input.csv')\nprint('rows', len(df))"),
    code_step("df['c'] = df.a / undefined_name"),
    code_step("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot(df.a, df.b)\nfig"),
    code_step("df.to_csv('output.csv', index=False)\nfinal_answer(int(df.b.sum()))"),
]


def check_the_run(agent, model, answer):
    assert answer == 60
    steps = action_steps(agent)
    assert len(steps) == 4, steps
    # "rows 3", or, through the E2B front, "rows\n \n3": smolagents' E2BExecutor
    # joins the stdout messages with newlines, and the front sends one per write.
    assert re.search(r"rows\s+3", steps[0].observations), steps[0].observations
    assert steps[1].error is not None and "NameError" in str(steps[1].error)
    assert "undefined_name" in sent_to_the_model(model.requests()[2])  # the error reached the model
    assert isinstance(steps[2].action_output, PIL.Image.Image)
    assert steps[2].action_output.size[0] > 100


def test_a_codeagent_runs_its_code_in_a_warden_session(client, model):
    from warden.integrations.smolagents import WardenExecutor
    model.script(SCRIPT)
    executor = WardenExecutor(client=client, timeout=60)
    executor.session.files.write("input.csv", "a,b\n1,10\n2,20\n3,30\n")
    agent = CodeAgent(tools=[], model=openai_model(model), executor=executor, max_steps=6)
    try:
        answer = agent.run("Load input.csv, plot b against a, save output.csv and give the sum of b.")
        check_the_run(agent, model, answer)
        assert executor.session.files.read("output.csv") == b"a,b\n1,10\n2,20\n3,30\n"
    finally:
        agent.cleanup()
    session_id = executor.session.id
    try:
        client.attach(session_id)
        raise AssertionError("the session outlived agent.cleanup()")
    except warden.NotFound:
        pass


def test_the_executor_reports_timeouts_and_pip_refusals_as_agent_errors(client):
    from smolagents.utils import AgentError

    from warden.integrations.smolagents import WardenExecutor
    executor = WardenExecutor(client=client, timeout=1)
    try:
        try:
            executor("while True: pass")
            raise AssertionError("no error")
        except AgentError as e:
            assert "WALL_TIMEOUT" in e.message
        assert executor("'still alive'").output == "'still alive'"
    finally:
        executor.cleanup()
    # Installed with the session's pip, as smolagents does: what the runtime
    # lacks and no wheelhouse holds fails at once and says why.
    try:
        WardenExecutor(["no_such_module_here"], client=client)
        raise AssertionError("no error")
    except AgentError as e:
        assert "pip install failed" in e.message and "wheelhouse" in e.message


def test_smolagents_own_e2b_executor_runs_on_warden(e2b_env, model):
    """executor_type="e2b": smolagents' E2BExecutor and the e2b-code-interpreter SDK, unmodified."""
    from smolagents.remote_executors import E2BExecutor
    model.script(SCRIPT)
    agent = CodeAgent(tools=[], model=openai_model(model), executor_type="e2b", max_steps=6)
    try:
        assert isinstance(agent.python_executor, E2BExecutor)
        agent.python_executor.sandbox.files.write("/home/user/input.csv", "a,b\n1,10\n2,20\n3,30\n")
        answer = agent.run("Load input.csv, plot b against a, save output.csv and give the sum of b.")
        check_the_run(agent, model, answer)
        assert agent.python_executor.sandbox.files.read("/home/user/output.csv") == "a,b\n1,10\n2,20\n3,30\n"
    finally:
        agent.cleanup()
