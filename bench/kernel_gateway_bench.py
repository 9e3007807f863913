"""Warden's Kernel Gateway front beside the real Jupyter Kernel Gateway
(jupyter-kernel-gateway from PyPI with ipykernel, in build/pyenv), on the
same work through the same client (REST with urllib, the WebSocket with
websocket-client): kernel start to first answered cell, a warm REST round
trip (GET /api/kernels/{id}), a warm cell round trip over the WebSocket,
and N kernels started and each answering a cell at once. Both run on this
machine, one after the other; Warden with its default pools.

    build/pyenv/bin/python bench/kernel_gateway_bench.py --bin-dir build/bin [--quick | --smoke]

prints one JSON object (run_bench.py's kernel_gateway section).
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import websocket

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, process, log, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("%s exited: %s" % (url, pathlib.Path(log).read_text(errors="replace")[-1500:]))
        try:
            urllib.request.urlopen(url + "/api", timeout=2).read()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not answer in %d s" % (url, timeout_s))


class Gateway:
    """A Kernel Gateway API at `url`: a process we started and stop."""

    def __init__(self, name, argv, url, workdir):
        self.name, self.url = name, url
        self.log_path = workdir / (name + ".log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=workdir)
        wait_http(url, self.process, self.log_path)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def warden_gateway(bin_dir, workdir, kernels):
    port = free_port()
    config = {"allow_insecure_loopback": True, "http_listen": "127.0.0.1:%d" % port,
              "sessions": {"max_per_tenant": kernels + 20, "max_total": kernels + 20},
              "executor": {"host_id_base": 6_000_000 + (os.getpid() % 2048) * 1024, "host_id_count": 1024}}
    (workdir / "wardend.json").write_text(json.dumps(config))
    return Gateway("warden", [str(bin_dir / "wardend"), "--config", str(workdir / "wardend.json"), "--listen",
                              "unix:%s" % (workdir / "w.sock")], "http://127.0.0.1:%d" % port, workdir)


def jupyter_gateway(workdir):
    port = free_port()
    env_dir = workdir / "jupyter"
    os.environ.update(JUPYTER_RUNTIME_DIR=str(env_dir / "runtime"), JUPYTER_CONFIG_DIR=str(env_dir / "config"),
                      JUPYTER_DATA_DIR=str(env_dir / "data"), PYDEVD_DISABLE_FILE_VALIDATION="1")
    return Gateway("kernel_gateway", [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                                      "--KernelGatewayApp.port=%d" % port, "--KernelGatewayApp.port_retries=0",
                                      "--JupyterWebsocketPersonality.list_kernels=True"],
                   "http://127.0.0.1:%d" % port, workdir)


class Kernel:
    """One kernel through the REST API and its WebSocket channel."""

    def __init__(self, url):
        self.url = url
        self.id = self.rest("POST", "/api/kernels", {"name": "python3"})["id"]
        # TCP_NODELAY: websocket-client writes a frame's header and payload
        # apart, which Nagle's algorithm and delayed ACKs would hold 40 ms.
        self.ws = websocket.create_connection(url.replace("http://", "ws://") + "/api/kernels/%s/channels" % self.id,
                                              timeout=120, sockopt=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),))

    def rest(self, method, path, body=None):
        request = urllib.request.Request(self.url + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            data = response.read()
        return json.loads(data) if data else None

    def execute(self, code):
        """Sends an execute_request; returns the execute_reply's content."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": "bench",
                                            "username": "bench", "version": "5.3", "date": ""},
                                 "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                                 "content": {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        while True:
            message = json.loads(self.ws.recv())
            if (message.get("msg_type") == "execute_reply" or message.get("header", {}).get("msg_type") ==
                    "execute_reply") and message.get("parent_header", {}).get("msg_id") == msg_id:
                return message["content"]

    def close(self):
        self.ws.close()
        self.rest("DELETE", "/api/kernels/%s" % self.id)


def percentiles(samples_ms):
    ordered = sorted(samples_ms)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3)}


def measure(url, starts, cells, kernels):
    out = {}
    first = []
    for _ in range(starts):
        t = time.perf_counter()
        k = Kernel(url)
        reply = k.execute("1 + 1")
        first.append((time.perf_counter() - t) * 1000)
        assert reply["status"] == "ok", reply
        k.close()
    out["start_to_first_cell"] = percentiles(first)
    k = Kernel(url)
    k.execute("x = 0")
    rest, ws = [], []
    for _ in range(cells):
        t = time.perf_counter()
        k.rest("GET", "/api/kernels/%s" % k.id)
        rest.append((time.perf_counter() - t) * 1000)
    for _ in range(cells):
        t = time.perf_counter()
        k.execute("x = 1")
        ws.append((time.perf_counter() - t) * 1000)
    k.close()
    out["rest_round_trip"] = percentiles(rest)
    out["ws_cell_round_trip"] = percentiles(ws)

    # N kernels at once: each started and answering one cell.
    opened, lock, failures = [], threading.Lock(), []

    def one(_):
        try:
            kernel = Kernel(url)
            with lock:
                opened.append(kernel)
            assert kernel.execute("sum(range(10))")["status"] == "ok"
        except Exception as e:  # a failed kernel is a figure too
            failures.append(repr(e)[:200])
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=kernels) as pool:
        list(pool.map(one, range(kernels)))
    total_s = time.perf_counter() - t
    out["concurrent"] = {"kernels": kernels, "answered": kernels - len(failures), "total_s": round(total_s, 2),
                         "failures": failures[:3]}
    for kernel in opened:
        try:
            kernel.close()
        except Exception:
            pass
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="the smallest run that gives every figure (a test)")
    parser.add_argument("--kernels", type=int, default=100)
    args = parser.parse_args()
    if args.smoke:
        starts, cells, kernels = 1, 10, min(args.kernels, 3)
    elif args.quick:
        starts, cells, kernels = 3, 200, min(args.kernels, 30)
    else:
        starts, cells, kernels = 5, 1000, args.kernels
    result = {"starts": starts, "cells": cells}
    with tempfile.TemporaryDirectory(prefix="warden-kg-bench-") as tmp:
        workdir = pathlib.Path(tmp)
        for name, start in (("warden", lambda: warden_gateway(pathlib.Path(args.bin_dir).resolve(), workdir,
                                                              kernels)),
                            ("kernel_gateway", lambda: jupyter_gateway(workdir))):
            gateway = start()
            try:
                result[name] = measure(gateway.url, starts, cells, kernels)
            finally:
                gateway.stop()
    w, j = result["warden"], result["kernel_gateway"]
    result["ratios"] = {  # Kernel Gateway / Warden: above 1, Warden is faster
        "start_to_first_cell_p50": round(j["start_to_first_cell"]["p50_ms"] / w["start_to_first_cell"]["p50_ms"], 2),
        "rest_round_trip_p50": round(j["rest_round_trip"]["p50_ms"] / w["rest_round_trip"]["p50_ms"], 2),
        "ws_cell_round_trip_p50": round(j["ws_cell_round_trip"]["p50_ms"] / w["ws_cell_round_trip"]["p50_ms"], 2),
        "concurrent_total": round(j["concurrent"]["total_s"] / w["concurrent"]["total_s"], 2),
    }
    for key, ratio in result["ratios"].items():
        print("%-28s Kernel Gateway / Warden = %.2fx" % (key, ratio), file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
