"""The network tests' internet: the upstream servers, run inside a network
namespace the test made (tests/network/network_test.py), on the public-looking
addresses it gave that namespace's loopback. Nothing here leaves the test's
namespaces.

    internet.py CONFIG.json

CONFIG holds {"servers": [{"name", "address", "port", "tls", "kind", ...}],
"ready_file"}. Kinds:
  echo     GET /generate_204 -> 204; /headers -> the request's headers as
           JSON (and recorded); /redirect?to=URL -> 302 to URL; /big?N -> N
           bytes; anything else -> 200 "hello from NAME"
  pypi     a PEP 503 index of the wheels in `wheels` (/simple/, /simple/P/,
           /packages/F)
  git      git-http-backend over `repos` (smart HTTP, clone only)
Recorded requests are kept per server and answered at /recorded.
"""

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    @property
    def spec(self):
        return self.server.spec

    def _send(self, status, body=b"", content_type="text/plain", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        self.do_GET()

    def do_GET(self):
        kind = self.spec["kind"]
        headers = {k: v for k, v in self.headers.items()}
        self.server.recorded.append({"path": self.path, "method": self.command, "headers": headers})
        if kind == "pypi":
            return self.pypi()
        if kind == "git":
            return self.git()
        url = urllib.parse.urlparse(self.path)
        if url.path == "/recorded":
            return self._send(200, json.dumps(self.server.recorded[:-1]).encode(), "application/json")
        if url.path == "/generate_204":
            return self._send(204)
        if url.path == "/headers":
            return self._send(200, json.dumps({"headers": headers}).encode(), "application/json")
        if url.path == "/redirect":
            to = urllib.parse.parse_qs(url.query).get("to", ["/"])[0]
            return self._send(302, b"", headers=[("Location", to)])
        if url.path == "/big":
            n = int(url.query or "0")
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:n])
                n -= len(chunk)
            return
        self._send(200, ("hello from %s\n" % self.spec["name"]).encode())

    def pypi(self):
        wheels = self.spec["wheels"]
        path = urllib.parse.urlparse(self.path).path
        files = sorted(os.listdir(wheels))
        if path == "/simple/":
            names = sorted({f.split("-")[0].lower().replace("_", "-") for f in files if f.endswith(".whl")})
            body = "".join('<a href="/simple/%s/">%s</a>\n' % (n, n) for n in names)
            return self._send(200, ("<!DOCTYPE html><html><body>%s</body></html>" % body).encode(), "text/html")
        if path.startswith("/simple/"):
            project = path[len("/simple/"):].strip("/").lower().replace("_", "-")
            links = [f for f in files if f.endswith(".whl") and f.split("-")[0].lower().replace("_", "-") == project]
            if not links:
                return self._send(404, b"not found")
            body = "".join('<a href="/packages/%s">%s</a>\n' % (f, f) for f in links)
            return self._send(200, ("<!DOCTYPE html><html><body>%s</body></html>" % body).encode(), "text/html")
        if path.startswith("/packages/"):
            name = os.path.basename(path)
            full = os.path.join(wheels, name)
            if name in files:
                with open(full, "rb") as f:
                    return self._send(200, f.read(), "application/octet-stream")
        return self._send(404, b"not found")

    def git(self):
        url = urllib.parse.urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "GIT_PROJECT_ROOT": self.spec["repos"],
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "REMOTE_ADDR": self.client_address[0],
            "PATH": "/usr/bin:/bin",
        }
        out = subprocess.run(["/usr/lib/git-core/git-http-backend"], input=body, env=env,
                             capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, spec):
        family = __import__("socket").AF_INET6 if ":" in spec["address"] else __import__("socket").AF_INET
        self.address_family = family
        super().__init__((spec["address"], spec["port"]), Handler)
        self.spec = spec
        self.recorded = []
        if spec.get("tls"):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(spec["cert"], spec["key"])
            # The handshake on the handler's thread, not the accepting one.
            self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    servers = [Server(spec) for spec in config["servers"]]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(config["ready_file"], "w") as f:
        f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
