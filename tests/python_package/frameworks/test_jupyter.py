"""Jupyter's own Python clients against Warden's Kernel Gateway front:
jupyter_client's kernel manager and client API through Jupyter Server's
gateway implementation of it (GatewayKernelManager / GatewayKernelClient,
which open /api/kernels and its WebSocket), and Jupyter Server itself
started with --gateway-url, its kernels then being Warden sessions."""
import asyncio
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import websocket
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager

from conftest import TOKEN_MAIN


def test_jupyter_client_api_over_the_gateway(open_wardend):
    gateway = GatewayClient.instance()
    gateway.url = open_wardend.http_url
    gateway.ws_url = open_wardend.http_url.replace("http://", "ws://")

    async def main():
        manager = GatewayKernelManager()
        await manager.start_kernel(kernel_name="python3")
        client = manager.client()
        await client.start_channels()
        try:
            outputs = []

            async def run(code):
                """jupyter_client's execute, then the shell reply and the iopub messages up to idle
                (execute_interactive polls zmq sockets, which the gateway client has not)."""
                msg_id = client.execute(code)
                reply = await client.get_shell_msg(timeout=60)
                assert reply["parent_header"]["msg_id"] == msg_id
                while True:
                    message = await client.get_iopub_msg(timeout=60)
                    if message["parent_header"].get("msg_id") != msg_id:
                        continue
                    outputs.append(message)
                    if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                        return reply
            reply = await run("x = 41\nprint('set')")
            assert reply["content"]["status"] == "ok"
            await run("x + 1")
            plot_from = len(outputs)
            await run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
            failed = await run("1 / 0")
            assert failed["content"]["status"] == "error" and failed["content"]["ename"] == "ZeroDivisionError"
            types = [m["msg_type"] for m in outputs]
            assert {"status", "execute_input", "stream", "execute_result", "display_data", "error"} <= set(types)
            [value] = [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "execute_result"]
            assert value == "42"
            assert any("image/png" in m["content"].get("data", {}) for m in outputs[plot_from:])
            await manager.restart_kernel()
            gone = await run("x")
            assert gone["content"]["ename"] == "NameError"
        finally:
            client.stop_channels()
            await manager.shutdown_kernel()
    asyncio.run(main())


def test_jupyter_server_with_gateway_url_runs_kernels_on_warden(wardend, tmp_path):
    token = uuid.uuid4().hex
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--ServerApp.port=%d" % port, "--ServerApp.ip=127.0.0.1",
         "--ServerApp.token=" + token, "--ServerApp.open_browser=False", "--ServerApp.root_dir=" + str(tmp_path),
         "--gateway-url=" + wardend.http_url, "--GatewayClient.auth_token=" + TOKEN_MAIN,
         "--ServerApp.port_retries=0", "--ServerApp.allow_root=True"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
                 JUPYTER_DATA_DIR=str(tmp_path / "data")))
    try:
        base = None
        log = []
        deadline = time.monotonic() + 60
        while base is None:
            line = server.stderr.readline()
            assert line and time.monotonic() < deadline, "Jupyter Server did not start:\n" + "".join(log)
            log.append(line)
            if "http://127.0.0.1:%d/" % port in line:
                base = "http://127.0.0.1:%d" % port
        headers = {"Authorization": "token " + token, "Content-Type": "application/json"}
        while True:  # listening once /api answers
            try:
                urllib.request.urlopen(base + "/api", timeout=5).read()
                break
            except OSError as e:
                assert server.poll() is None and time.monotonic() < deadline, \
                    "Jupyter Server does not answer (%r):\n%s" % (e, "".join(log))
                time.sleep(0.1)

        def api(method, path, body=None):
            request = urllib.request.Request(base + path, method=method, headers=headers,
                                             data=json.dumps(body).encode() if body is not None else None)
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null")
        kernel = api("POST", "/api/kernels", {"name": "python3"})
        # The kernel is a Warden session: the daemon lists it for this tenant.
        import warden
        with warden.Client() as client:
            assert any(kernel["id"].replace("-", "").startswith(s.id[2:]) for s in client.sessions())
        channel = websocket.create_connection(base.replace("http", "ws") + "/api/kernels/%s/channels" % kernel["id"],
                                              header=["Authorization: token " + token], timeout=60)
        try:
            def execute(code):
                msg_id = uuid.uuid4().hex
                channel.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": "s",
                                                   "username": "u", "version": "5.3", "date": ""},
                                        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                                        "content": {"code": code, "silent": False, "store_history": True,
                                                    "user_expressions": {}, "allow_stdin": False}}))
                seen = []
                while True:
                    message = json.loads(channel.recv())
                    if message.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    seen.append(message)
                    if message["msg_type"] == "execute_reply":
                        return message, seen
            execute("y = 6")
            reply, seen = execute("print(y * 7)")
            assert reply["content"]["status"] == "ok"
            assert any(m["msg_type"] == "stream" and m["content"]["text"] == "42\n" for m in seen)
        finally:
            channel.close()
        api("DELETE", "/api/kernels/" + kernel["id"])
    finally:
        server.terminate()
        server.wait(timeout=30)
