"""The MCP Python SDK (mcp), unmodified, as a client of Warden: over
Streamable HTTP (/mcp on the daemon's HTTP front, with the tenant's token)
and over stdio (`warden mcp`), each in the legacy era (the initialize
handshake) and as the SDK negotiates by itself ("auto": server/discover,
the stateless 2026-07-28 revision Warden also serves)."""
import asyncio
import base64
import os
import pathlib

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import TOKEN_MAIN


def http_server(wardend):
    return streamable_http_client(wardend.http_url + "/mcp", http_client=create_mcp_http_client(
        headers={"Authorization": "Bearer " + TOKEN_MAIN}))


def stdio_server(wardend):
    return StdioServerParameters(command=str(pathlib.Path(os.environ["WARDEN_BIN_DIR"]) / "warden"), args=["mcp"],
                                 env={"WARDEN_ADDR": wardend.address, "WARDEN_TOKEN": TOKEN_MAIN})


def text(result):
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("transport", [http_server, stdio_server], ids=["http", "stdio"])
def test_the_mcp_sdk_runs_code_keeps_sessions_and_moves_files(wardend, transport, mode):
    async def main():
        async with Client(transport(wardend), mode=mode, read_timeout_seconds=120) as client:
            if mode == "auto" and transport is http_server:
                assert client.protocol_version == "2026-07-28"  # the modern, stateless revision
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"execute_code", "create_session", "upload_file", "download_file", "list_files"} <= set(tools)
            one_shot = await client.call_tool("execute_code", {"code": "print(6 * 7)"})
            assert text(one_shot) == "42\n" and not one_shot.is_error
            assert one_shot.structured_content["outcome"] == "ok"

            created = await client.call_tool("create_session", {"language": "python"})
            session_id = created.structured_content["session_id"]
            try:
                await client.call_tool("upload_file", {"session_id": session_id, "path": "in.txt",
                                                       "content_base64": base64.b64encode(b"3 4 5").decode()})
                await client.call_tool("execute_code", {"session_id": session_id,
                                                        "code": "nums = [int(x) for x in open('in.txt').read().split()]"})
                total = await client.call_tool("execute_code", {"session_id": session_id, "code": "sum(nums)"})
                assert text(total) == "12"
                failed = await client.call_tool("execute_code", {"session_id": session_id, "code": "nums[10]"})
                assert failed.is_error and "IndexError" in text(failed)
                plot = await client.call_tool("execute_code", {"session_id": session_id, "code":
                                              "import matplotlib.pyplot as plt\nplt.plot(nums)\nplt.show()\n"
                                              "open('out.txt', 'w').write(str(max(nums)))"})
                [image] = [b for b in plot.content if b.type == "image"]
                assert image.mime_type == "image/png" and base64.b64decode(image.data)[1:4] == b"PNG"
                listed = await client.call_tool("list_files", {"session_id": session_id})
                assert {"in.txt", "out.txt"} <= {f["path"] for f in listed.structured_content["files"]}
                downloaded = await client.call_tool("download_file", {"session_id": session_id, "path": "out.txt"})
                [resource] = [b for b in downloaded.content if b.type == "resource"]
                assert base64.b64decode(resource.resource.blob) == b"5"
            finally:
                await client.call_tool("close_session", {"session_id": session_id})
            gone = await client.call_tool("execute_code", {"session_id": session_id, "code": "1"})
            assert gone.is_error and "create_session" in text(gone)
    asyncio.run(main())


def test_progress_streams_output_while_the_code_runs(wardend):
    async def main():
        chunks = []

        async def on_progress(progress, total, message):
            chunks.append(message)
        async with Client(http_server(wardend), mode="legacy", read_timeout_seconds=120) as client:
            result = await client.call_tool("execute_code", {"code": "for i in range(3): print('tick', i, flush=True)"},
                                            progress_callback=on_progress)
        assert text(result) == "tick 0\ntick 1\ntick 2\n"
        assert "".join(c for c in chunks if c) == "tick 0\ntick 1\ntick 2\n"
    asyncio.run(main())
