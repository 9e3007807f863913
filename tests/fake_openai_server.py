#!/usr/bin/python3
"""A faithful fake of an OpenAI-compatible chat-completions server, for tests.

It speaks the real wire protocol over HTTP on loopback -- POST
.../chat/completions answered as a chat.completion object, or as
chat.completion.chunk server-sent events when the request says "stream": true
-- and plays a scripted conversation: each request takes the script's next
step. A step is either a reply

    {"content": "text", "tool_calls": [{"name": "execute_code",
     "arguments": "{...}"}], "usage": {...}, "delay_ms": 0,
     "chunk_chars": 8, "chunk_delay_ms": 0, "no_usage": false,
     "repeat_name": false}

or an HTTP failure

    {"status": 429, "headers": {"Retry-After": "0"}, "body": {...}}

A reply step may also make the server die as a crashing model server does:
"die": "SIGSEGV" (a signal's name: the process kills itself with it) or an
exit status (an int), before it answers, or, when streaming, after
"die_after_chunks" events; it says so on stderr first. "chunked": true
streams with Transfer-Encoding: chunked, as uvicorn (llama-cpp-python's
server, vLLM) does, so that a reply cut short is cut inside a chunk.

Every request is recorded; GET /_requests returns them (with "aborted": true
when the client hung up while the server was still answering), so tests can
check what the model was sent.

With --upstream BASE_URL instead of a script it plays no model itself: it
forwards each chat-completions request to a real server (e.g.
tests/local_model_server.py) and relays the answer, recording the request
the same way, so a test against a real model can still read what it was
sent. An upstream that fails (refuses the connection, closes it before or
in the middle of its answer) is a 502 whose error message says how, as a
reverse proxy answers.

usage: fake_openai_server.py (--script FILE | --upstream BASE_URL) [--api-key KEY] [--models a,b]
Prints the port it listens on (127.0.0.1) as its first line.
"""
import argparse
import http.client
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"next": 0, "requests": []}


def chars_to_tokens(text):
    return max(1, len(text) // 4)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = []
    api_key = None
    models = None
    upstream = None  # a real server's base URL, ending in /v1

    def log_message(self, *args):  # quiet
        pass

    # -- helpers -----------------------------------------------------------
    def client_gone(self):
        """True if the client closed its end (EOF readable, nothing sent)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def wait(self, ms, record):
        """Sleeps ms, noticing a client that hangs up meanwhile."""
        deadline = time.monotonic() + ms / 1000.0
        while time.monotonic() < deadline:
            if self.client_gone():
                with LOCK:
                    record["aborted"] = True
                return False
            time.sleep(0.02)
        return True

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    # -- routes ------------------------------------------------------------
    def do_GET(self):
        if self.path == "/_requests":
            with LOCK:
                self.send_json(200, STATE["requests"])
            return
        if self.path.endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in (self.models or ["fake-model"])]})
            return
        self.send_json(404, {"error": {"message": "no route " + self.path}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self.send_json(400, {"error": {"message": "body is not JSON"}})
            return
        record = {"path": self.path, "body": body, "aborted": False,
                  "authorization": self.headers.get("Authorization", "")}
        with LOCK:
            STATE["requests"].append(record)
        if self.path != "/v1/chat/completions":  # as vLLM, Ollama and OpenAI serve it
            self.send_json(404, {"error": {"message": "Not Found: " + self.path}})
            return
        if self.api_key is not None and record["authorization"] != "Bearer " + self.api_key:
            self.send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
            return
        if self.models is not None and body.get("model") not in self.models:
            self.send_json(404, {"error": {"message": "The model `%s` does not exist" % body.get("model"), "code": "model_not_found"}})
            return
        with LOCK:
            index = STATE["next"]
            STATE["next"] += 1
            record["step"] = index
        if self.upstream:
            self.relay(raw)
            return
        if index >= len(self.script):
            self.send_json(500, {"error": {"message": "fake server: the script has no step %d" % index}})
            return
        step = self.script[index]
        if step.get("delay_ms") and not self.wait(step["delay_ms"], record):
            self.close_connection = True
            return
        if step.get("status", 200) != 200:
            body_out = step.get("body", {"error": {"message": "scripted failure %d" % step["status"]}})
            self.send_json(step["status"], body_out, step.get("headers"))
            return
        if "die" in step and not (body.get("stream") and "die_after_chunks" in step):
            die(step["die"], "before answering request %d" % index)
        if body.get("stream"):
            self.stream_reply(step, body, record)
        else:
            self.send_json(200, self.completion(step, body))

    def relay(self, raw):
        """Forwards the request to the upstream server and its whole answer back."""
        url = self.upstream + "/chat/completions"
        request = urllib.request.Request(url, data=raw, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                status, content_type, data = response.status, response.headers.get("Content-Type"), response.read()
        except urllib.error.HTTPError as e:
            status, content_type, data = e.code, e.headers.get("Content-Type"), e.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            # Refused, reset, or closed before or inside the answer: a
            # gateway's 502, saying how.
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            self.send_json(502, {"error": {"message": "the upstream server at %s failed: %s: %s"
                                           % (url, type(reason).__name__, reason), "type": "bad_gateway"}})
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- replies -----------------------------------------------------------
    def usage(self, step, request):
        if "usage" in step:
            u = dict(step["usage"])
        else:
            prompt = chars_to_tokens(json.dumps(request.get("messages", [])))
            out = step.get("content", "") + "".join(c.get("arguments", "") for c in step.get("tool_calls", []))
            u = {"prompt_tokens": prompt, "completion_tokens": chars_to_tokens(out)}
        u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
        return u

    def tool_calls(self, step):
        calls = []
        for i, c in enumerate(step.get("tool_calls", [])):
            calls.append({"id": c.get("id", "call_%d_%d" % (STATE["next"], i)), "type": "function",
                          "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}})
        return calls

    def completion(self, step, request):
        message = {"role": "assistant", "content": step.get("content")}
        calls = self.tool_calls(step)
        if calls:
            message["tool_calls"] = calls
        reply = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                 "model": request.get("model"),
                 "choices": [{"index": 0, "message": message,
                              "finish_reason": step.get("finish_reason", "tool_calls" if calls else "stop")}]}
        if not step.get("no_usage"):
            reply["usage"] = self.usage(step, request)
        return reply

    def stream_reply(self, step, request, record):
        chunked = step.get("chunked", False)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        size = max(1, step.get("chunk_chars", 8))
        delay = step.get("chunk_delay_ms", 0)
        sent = [0]

        def chunk(delta, finish=None, usage=None, choices=True):
            obj = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                   "model": request.get("model"),
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
            if usage is not None:
                obj["usage"] = usage
            return obj

        def send(obj):
            if "die" in step and sent[0] == step.get("die_after_chunks", -1):
                die(step["die"], "after %d events of its stream" % sent[0])
            if delay and not self.wait(delay, record):
                raise BrokenPipeError()
            data = obj if isinstance(obj, str) else json.dumps(obj)
            event = ("data: %s\n\n" % data).encode()
            if chunked:
                event = b"%x\r\n%s\r\n" % (len(event), event)
            self.wfile.write(event)
            self.wfile.flush()
            sent[0] += 1

        try:
            send(chunk({"role": "assistant", "content": ""}))
            text = step.get("content") or ""
            for i in range(0, len(text), size):
                send(chunk({"content": text[i:i + size]}))
            for i, call in enumerate(self.tool_calls(step)):
                send(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                            "function": {"name": call["function"]["name"], "arguments": ""}}]}))
                args = call["function"]["arguments"]
                for j in range(0, len(args), size):
                    function = {"arguments": args[j:j + size]}
                    if step.get("repeat_name"):  # as llama-cpp-python's server streams them
                        function["name"] = call["function"]["name"]
                    send(chunk({"tool_calls": [{"index": i, "function": function}]}))
            finish = step.get("finish_reason", "tool_calls" if step.get("tool_calls") else "stop")
            send(chunk({}, finish))
            opts = request.get("stream_options") or {}
            if opts.get("include_usage") and not step.get("no_usage"):
                send(chunk(None, usage=self.usage(step, request), choices=False))
            send("[DONE]")
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with LOCK:
                record["aborted"] = True


def die(how, when):
    """Ends the process as a crashing server ends: by a signal (its name) or
    an exit status, saying so on stderr first."""
    sys.stderr.write("fake_openai_server: dying (%s) %s, as the script says\n" % (how, when))
    sys.stderr.flush()
    if isinstance(how, str):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core file
        os.kill(os.getpid(), getattr(signal, how))     # (its default action: Python sets none for SIGSEGV)
        time.sleep(10)
    os._exit(int(how))


def main():
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script")
    source.add_argument("--upstream", help="a real OpenAI-compatible server's base URL (.../v1)")
    parser.add_argument("--api-key")
    parser.add_argument("--models")
    args = parser.parse_args()
    if args.script:
        with open(args.script) as f:
            Handler.script = json.load(f)["responses"]
    Handler.upstream = args.upstream.rstrip("/") if args.upstream else None
    Handler.api_key = args.api_key
    Handler.models = args.models.split(",") if args.models else None
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
