"""The OpenAI Agents SDK (openai-agents) with Warden: an Agent whose Runner
loop calls warden.integrations.openai_agents.warden_function_tool, and the
same Agent reaching Warden as an MCP server, over Streamable HTTP (/mcp,
MCPServerStreamableHttp) and over stdio (`warden mcp`, MCPServerStdio). The
model is the SDK's own OpenAIChatCompletionsModel talking to the scripted
OpenAI-compatible server (tests/fake_openai_server.py), which records every
request."""
import asyncio
import json
import os
import pathlib

from agents import (Agent, OpenAIChatCompletionsModel, Runner, ToolCallOutputItem, ToolOutputImage,
                    set_tracing_disabled)
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI

import warden
from conftest import TOKEN_MAIN, text_step

set_tracing_disabled(True)  # no traces sent anywhere


def call(name, arguments):
    return {"content": "", "tool_calls": [{"name": name, "arguments": json.dumps(arguments)}]}


def chat_model(base_url, model="fake-model"):
    return OpenAIChatCompletionsModel(model=model, openai_client=AsyncOpenAI(base_url=base_url, api_key="unused"))


def tool_outputs(result):
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


def tool_messages(request):
    """The text of each tool message (a string, or a list of content parts)."""
    return [m["content"] if isinstance(m["content"], str) else str(m["content"])
            for m in request["body"]["messages"] if m["role"] == "tool"]


def test_an_agent_runs_code_through_the_function_tool(wardend, model):
    from warden.integrations.openai_agents import warden_function_tool
    model.script([
        call("run_code", {"code": "import json\nrows = json.load(open('rows.json'))\nlen(rows)"}),
        call("run_code", {"code": "sum(r['v'] for r in rowz)"}),
        call("run_code", {"code": "import matplotlib.pyplot as plt\nplt.plot([r['v'] for r in rows])\nplt.show()\n"
                                  "open('total.txt', 'w').write(str(sum(r['v'] for r in rows)))\nprint('saved')"}),
        text_step("The total is 6."),
    ])

    async def main():
        async with warden.AsyncClient() as client, client.session() as session:
            await session.files.write("rows.json", json.dumps([{"v": 1}, {"v": 2}, {"v": 3}]))
            agent = Agent(name="analyst", instructions="Use run_code.", model=chat_model(model.base_url),
                          tools=[warden_function_tool(client, session)])
            result = await Runner.run(agent, "Total the v column of rows.json and plot it.")
            outputs = tool_outputs(result)
            assert outputs[0] == "3"
            assert "NameError" in outputs[1]
            assert "NameError" in tool_messages(model.requests()[2])[1], "the error reached the model"
            text, *images = outputs[2]
            assert text.text == "saved" and images and isinstance(images[0], ToolOutputImage)
            assert images[0].image_url.startswith("data:image/png;base64,")
            assert result.final_output == "The total is 6."
            assert await session.files.read("total.txt") == b"6"
    asyncio.run(main())


def mcp_script(session_id):
    return [
        call("execute_code", {"code": "import pandas as pd\ndf = pd.read_csv('t.csv')\nlen(df)",
                              "session_id": session_id}),
        call("execute_code", {"code": "df.nope", "session_id": session_id}),
        call("execute_code", {"code": "import matplotlib.pyplot as plt\ndf.t.plot()\nplt.show()\n"
                                      "df.to_csv('out.csv', index=False)\nint(df.t.max())",
                              "session_id": session_id}),
        text_step("The highest t is 9."),
    ]


def run_over_mcp(wardend, model, server_factory):
    """An Agent with Warden as its MCP server: its tools are Warden's; a Warden session carries the state."""
    with warden.Client() as client, client.session() as session:
        session.files.write("t.csv", "t\n4\n9\n2\n")
        model.script(mcp_script(session.id))

        async def main():
            async with server_factory() as server:
                names = [t.name for t in await server.list_tools()]
                assert "execute_code" in names and "create_session" in names
                agent = Agent(name="analyst", model=chat_model(model.base_url), mcp_servers=[server])
                return await Runner.run(agent, "What is the highest t in t.csv?")
        result = asyncio.run(main())
        outputs = [str(o) for o in tool_outputs(result)]
        assert '"3"' in outputs[0] or "'3'" in outputs[0] or outputs[0].endswith("3"), outputs[0]
        assert "AttributeError" in outputs[1]
        assert "AttributeError" in tool_messages(model.requests()[2])[1], "the error reached the model"
        assert "image" in outputs[2] and "9" in outputs[2]  # the plot as an MCP image block, and the value
        assert result.final_output == "The highest t is 9."
        assert session.files.read("out.csv") == b"t\n4\n9\n2\n"


def test_an_agent_uses_warden_as_its_mcp_server_over_streamable_http(wardend, model):
    run_over_mcp(wardend, model, lambda: MCPServerStreamableHttp(
        params={"url": wardend.http_url + "/mcp", "headers": {"Authorization": "Bearer " + TOKEN_MAIN}},
        client_session_timeout_seconds=60))


def test_an_agent_uses_warden_mcp_over_stdio(wardend, model):
    warden_cli = str(pathlib.Path(os.environ["WARDEN_BIN_DIR"]) / "warden")
    run_over_mcp(wardend, model, lambda: MCPServerStdio(
        params={"command": warden_cli, "args": ["mcp"],
                "env": {"WARDEN_ADDR": wardend.address, "WARDEN_TOKEN": TOKEN_MAIN}},
        client_session_timeout_seconds=60))
