"""LangChain and LangGraph with Warden: LangGraph's prebuilt ReAct agent
(create_react_agent) calling warden.integrations.langchain.warden_tool, the
model being langchain-core's own GenericFakeChatModel playing scripted tool
calls (with bind_tools, which the fake leaves unimplemented, returning the
model unchanged), so the graph's own loop calls Warden."""
import asyncio

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent

import warden


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools and records what it is sent."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append([m.content for m in messages])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def call(code, n):
    return AIMessage(content="", tool_calls=[{"name": "run_code", "args": {"code": code}, "id": "call_%d" % n}])


def test_a_langgraph_agent_runs_code_in_a_session(client):
    from warden.integrations.langchain import warden_tool
    model = ScriptedChatModel(messages=iter([
        call("import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.total.sum()", 1),
        call("df.groupby('region').total.sum().idxmax() + undefined", 2),
        call("import matplotlib.pyplot as plt\ndf.plot.bar(x='region', y='total')\nplt.show()\n"
             "df.groupby('region').total.sum().idxmax()", 3),
        AIMessage(content="The north sold the most (60 in all)."),
    ]), seen=[])
    with client.session() as session:
        session.files.write("sales.csv", "region,total\nnorth,40\nsouth,15\nnorth,20\n")
        tool = warden_tool(client, session)
        assert tool.name == "run_code" and "persist" in tool.description
        agent = create_react_agent(model, [tool])
        state = agent.invoke({"messages": [("user", "Which region sold the most?")]})
        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        assert [r.content for r in results[:1]] == ["75"]
        assert "NameError" in results[1].content and results[1].artifact.outcome == "ERROR"
        assert "NameError" in "\n".join(model.seen[2]), "the error reached the model"
        assert results[2].content.endswith("'north'")  # df from the first step
        assert results[2].artifact.results[0].png[:4] == b"\x89PNG"  # the plot
        assert state["messages"][-1].content == "The north sold the most (60 in all)."


def test_the_tool_one_shot_async(wardend):
    from warden.integrations.langchain import warden_tool

    async def main():
        async with warden.AsyncClient() as aclient:
            tool = warden_tool(aclient)
            assert "fresh" in tool.description
            message = await tool.ainvoke({"type": "tool_call", "name": "run_code", "id": "1",
                                          "args": {"code": "print(1 + 1)"}})
            assert message.content == "2" and message.artifact.ok
    asyncio.run(main())
