"""Network on purpose (issue #30), end to end, all on this machine.

The test runs in network and mount namespaces of its own (ctest starts it
under `unshare --net --mount`): wardend and its clients live there, and "the
internet" is a second namespace it makes (`ip netns add`, private to its
mount namespace) behind a veth pair, whose loopback carries public-looking
addresses (1.1.1.1, 8.8.8.8, 93.184.215.x, 2606:4700:4700::1111) served by
tests/network/internet.py: HTTPS hosts with certificates of a test CA, a
local package index for pip, git's smart HTTP, and a server that records the
headers it gets. wardend's egress proxy finds them through egress.hosts and
checks them against that CA (egress.upstream_ca_file); sandboxes trust it
through their own bundle (egress.sandbox_ca_files). One wardend and one
internet for the whole file.

Each check of the issue has an attempt to break it here: a disallowed name,
an allowed name resolving to 127.0.0.1 or 169.254.169.254, SNI and Host
mismatches, an IP literal, IPv6, a redirect to a disallowed host, DNS from
inside, a raw socket, a UDP packet, the byte limit, one session's channel
used by another; and exposed ports: an HTTP and a WebSocket server in a
session reached through the HTTP front, with and without the traffic token,
across hibernation. The E2B SDK's own network calls run against the same
daemon (tests/e2b/e2b_network_test.mjs).

    unshare --net --mount -- /usr/bin/python3 -m unittest -v tests/network/network_test.py
"""

import json
import os
import pathlib
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

import grpc

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "network"))
from world import BIN, HOSTS, OPERATOR_SECRET, RPC_TIMEOUT, SECRET, TRAPS, World  # noqa: E402

WORLD = None


def setUpModule():
    global WORLD
    WORLD = World()


def tearDownModule():
    if WORLD is not None:
        WORLD.close()


class NetworkTest(unittest.TestCase):
    maxDiff = None

    @property
    def pb(self):
        return WORLD.pb

    def md(self, tenant="main"):
        return [("authorization", "Bearer " + WORLD.tokens[tenant])]

    def create(self, tenant="main", network=None, shared=True, language=None, **kw):
        """A session; Python's unless `language` (a bash session's pool has no policy of its own)."""
        request = self.pb.CreateSessionRequest(language=language or self.pb.LANGUAGE_PYTHON,
                                               shared_workspace=shared, **kw)
        if network is not None:
            request.network.CopyFrom(network)
        session = WORLD.stub.CreateSession(request, metadata=self.md(tenant), timeout=RPC_TIMEOUT)
        self.addCleanup(self.close_session, session.id, tenant)
        return session

    def close_session(self, session_id, tenant):
        try:
            WORLD.stub.CloseSession(self.pb.CloseSessionRequest(session_id=session_id), metadata=self.md(tenant),
                                    timeout=RPC_TIMEOUT)
        except grpc.RpcError:
            pass

    def policy(self, allow=(), deny=(), allow_by_default=False, secrets=(), header_rules=()):
        p = self.pb.NetworkPolicy(allow=list(allow), deny=list(deny), allow_by_default=allow_by_default)
        for name, value, hosts in secrets:
            p.secrets.add(name=name, value=value, hosts=list(hosts))
        for host, headers in header_rules:
            p.header_rules.add(host=host, headers=headers)
        return p

    def run_in(self, session, command, tenant="main", timeout_ms=60000):
        """`bash -c command` in the session: (exit code, stdout, stderr)."""
        request = self.pb.RunCommandRequest(session_id=session.id, argv=["/bin/bash", "-c", command],
                                            timeout_ms=timeout_ms)
        out, err, code = b"", b"", None
        for event in WORLD.stub.RunCommand(request, metadata=self.md(tenant), timeout=RPC_TIMEOUT):
            kind = event.WhichOneof("event")
            if kind == "stdout":
                out += event.stdout
            elif kind == "stderr":
                err += event.stderr
            elif kind == "end":
                code = event.end.exit_code
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def recorded(self, address):
        """What the header-recording server at `address` got (asked directly, not through wardend)."""
        import ssl
        context = ssl.create_default_context(cafile=str(WORLD.ca_file))
        context.check_hostname = False
        with urllib.request.urlopen("https://%s/recorded" % address, context=context, timeout=10) as r:
            return json.loads(r.read())

    # ---- Without a policy

    def test_without_a_policy_every_attempt_fails_at_once_saying_why(self):
        session = self.create(language=self.pb.LANGUAGE_BASH)  # its pool has no policy
        start = time.monotonic()
        code, out, err = self.run_in(session, "curl -sS -o /dev/null https://one.test/ 2>&1; "
                                              "python3 -c \"import requests; requests.get('https://one.test/')\" 2>&1")
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("403", out)
        self.assertIn("no network policy", out)
        self.assertIn("CreateSessionRequest.network", out)

    def test_a_pools_policy_serves_one_shots(self):
        # The python pool's policy allows api.test; nothing else.
        request = self.pb.ExecuteRequest(code=(
            "import urllib.request\n"
            "print(urllib.request.urlopen('https://api.test/generate_204').status)\n"
            "try:\n    urllib.request.urlopen('https://one.test/')\nexcept Exception as e:\n    print('refused', e)\n"))
        response = WORLD.stub.Execute(request, metadata=self.md(), timeout=RPC_TIMEOUT)
        self.assertEqual(response.outcome, self.pb.OUTCOME_OK, response.stderr)
        self.assertIn(b"204", response.stdout)
        self.assertIn(b"refused", response.stdout)
        self.assertIn(b"pool policy", response.stdout)

    # ---- Real clients through the proxy

    def test_pip_installs_from_an_https_index(self):
        session = self.create(network=self.policy(allow=["pypi.test"]),
                              env={"PIP_INDEX_URL": "https://pypi.test/simple/"})
        code, out, err = self.run_in(session, "pip install wardennettest && python3 -c "
                                              "'import wardennettest; print(wardennettest.VALUE)'")
        self.assertEqual(code, 0, out + err)
        self.assertIn("net ok from the index", out)

    def test_git_clones_over_https(self):
        session = self.create(network=self.policy(allow=["git.test"]))
        code, out, err = self.run_in(session, "git clone -q https://git.test/repo.git r && cat r/README")
        self.assertEqual(code, 0, out + err)
        self.assertIn("cloned through the egress proxy", out)

    def test_node_fetch_and_python_requests_go_through_the_proxy(self):
        session = self.create(network=self.policy(allow=["one.test"]))
        code, out, err = self.run_in(session, (
            "node -e \"fetch('https://one.test/').then(r => r.text()).then(t => console.log('node:', t.trim()))\"; "
            "python3 -c \"import requests; print('requests:', requests.get('https://one.test/').text.strip())\""))
        self.assertEqual(code, 0, out + err)
        self.assertIn("node: hello from one.test", out)
        self.assertIn("requests: hello from one.test", out)

    def test_a_templates_sandbox_has_the_same_way_out_and_ca_bundle(self):
        # A session in a template (an OCI image, docs/templates.md): the
        # Debian image the template tests use (cached; the ctest fixture
        # template_debian_image builds it), imported with the CLI.
        archive = subprocess.run([str(REPO / "tests/images/debian_image.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip()
        env = dict(os.environ, WARDEN_ADDR="unix:%s" % WORLD.socket, WARDEN_TOKEN=WORLD.tokens["main"])
        imported = subprocess.run([str(BIN / "warden"), "template", "import", archive, "--name", "net-debian",
                                   "--ref", "debian"], env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(imported.returncode, 0, imported.stderr)
        # A line of the test CA's certificate: the sandbox's bundle holds it.
        ca_line = pathlib.Path(WORLD.ca_file).read_text().splitlines()[3]
        session = self.create(network=self.policy(allow=["one.test"]), template="net-debian")
        self.assertEqual(session.template, "net-debian")
        code, out, err = self.run_in(session, (
            "test -d /opt/venv/lib && echo the image; "
            "python3 -c \"import urllib.request; print('urllib:', urllib.request.urlopen('https://one.test/')"
            ".read().decode().strip())\"; "
            "python3 -c \"import urllib.request; urllib.request.urlopen('https://other.test/')\" 2>&1 | tail -1; "
            "grep -cF '%s' /etc/ssl/certs/ca-certificates.crt" % ca_line))
        self.assertEqual(code, 0, out + err)
        self.assertIn("the image\n", out)  # the image's own root, not the host's runtime
        self.assertIn("urllib: hello from one.test", out)  # TLS to the proxy, trusted through the bundle
        self.assertIn("403", out)  # a host the policy does not allow
        self.assertTrue(out.endswith("\n1\n"), out)  # Warden's bundle over the image's own

    def test_ipv6_hosts_are_reached_and_checked(self):
        session = self.create(network=self.policy(allow=["v6.test"]))
        code, out, err = self.run_in(session, "curl -sS https://v6.test/")
        self.assertEqual(code, 0, out + err)
        self.assertIn("hello from v6.test", out)
        # Its address written out is refused (not allowed), ::1 too (loopback).
        code, out, err = self.run_in(session, "curl -sS https://[2606:4700:4700::1111]/ 2>&1; "
                                              "curl -sS http://[::1]:8080/ 2>&1; true")
        self.assertIn("403", out)

    # ---- Secrets

    def test_secrets_reach_their_host_and_never_the_sandbox(self):
        session = self.create(network=self.policy(allow=["api.test", "other.test"],
                                                  secrets=[("API_KEY", SECRET, ["api.test"])],
                                                  header_rules=[("api.test", {"X-Rule": "rule-" + SECRET[-6:]})]))
        code, out, err = self.run_in(session, (
            'echo "env=$API_KEY op=$OPERATOR_TOKEN"; '
            'curl -sS -H "Authorization: Bearer $API_KEY" -H "X-Op: $OPERATOR_TOKEN" https://api.test/headers; echo; '
            'curl -sS -H "Authorization: Bearer $API_KEY" https://other.test/headers; echo; '
            'grep -rs "%s" /proc/self/environ /workspace /tmp /etc 2>/dev/null | head -1; true' % SECRET))
        self.assertEqual(code, 0, out + err)
        self.assertIn("env=warden-secret-API_KEY op=warden-secret-OPERATOR_TOKEN", out)
        lines = out.splitlines()
        seen = json.loads(lines[1])["headers"]
        self.assertEqual(seen["Authorization"], "Bearer " + SECRET)
        self.assertEqual(seen["X-Op"], OPERATOR_SECRET)
        self.assertEqual(seen["X-Rule"], "rule-" + SECRET[-6:])
        elsewhere = json.loads(lines[2])["headers"]
        self.assertEqual(elsewhere["Authorization"], "Bearer warden-secret-API_KEY")
        # What the sandbox read back holds no secret but what the host echoed
        # (a host that reflects headers gives them away: docs/security.md).
        self.assertNotIn(SECRET, "\n".join(lines[2:]))
        # Never in GetSession, the log, or /metrics.
        got = WORLD.stub.GetSession(self.pb.GetSessionRequest(session_id=session.id), metadata=self.md(),
                                    timeout=RPC_TIMEOUT)
        self.assertNotIn(SECRET, str(got))
        self.assertEqual(got.network.secrets[0].value, "(hidden)")
        self.assertNotIn(SECRET, WORLD.log_text())
        self.assertNotIn(OPERATOR_SECRET, WORLD.log_text())
        metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % WORLD.http_port, timeout=10).read().decode()
        self.assertNotIn(SECRET, metrics)
        self.assertIn('warden_egress_bytes{direction="out",tenant="main"}', metrics)
        self.assertRegex(WORLD.log_text(), r"egress tenant=main session=%s host=api.test port=443 .*decision=allowed "
                                           r"mode=intercept .*secrets=1" % session.id)

    def test_a_tenant_without_the_right_cannot_bind_secrets(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.create(tenant="narrow", network=self.policy(allow=["api.test"],
                                                             secrets=[("K", SECRET, ["api.test"])]))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("session_secrets", caught.exception.details())
        self.assertNotIn(SECRET, caught.exception.details())

    # ---- The checks, each with an attempt to break it

    def test_a_name_the_policy_does_not_allow_is_refused(self):
        session = self.create(network=self.policy(allow=["api.test"]))
        code, out, err = self.run_in(session, "curl -sS https://one.test/ 2>&1; true")
        self.assertIn("403", out)
        self.assertIn("one.test:443 is refused by session %s's network policy" % session.id,
                      self.proxy_answer(session, "one.test:443"))

    def proxy_answer(self, session, target, tenant="main"):
        """The proxy's whole answer to CONNECT `target` from inside the session."""
        code, out, err = self.run_in(session, (
            "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' >&3; "
            "timeout 5 cat <&3") % (target, target), tenant=tenant)
        return out

    def test_allowed_names_resolving_inside_the_host_are_refused(self):
        session = self.create(network=self.policy(allow=["*"]))
        for name, address, what in [("loopback.test", "127.0.0.1", "a loopback address"),
                                    ("metadata.test", "169.254.169.254", "a cloud metadata service's address"),
                                    ("private.test", "10.77.0.2", "a private address"),
                                    ("self.test", "10.77.0.1", "an address of this host")]:
            answer = self.proxy_answer(session, name + ":80")
            self.assertIn("403", answer, name)
            self.assertIn("resolves to %s, which is %s" % (address, what), answer)
        # The addresses written out, likewise.
        self.assertIn("is a cloud metadata service's address", self.proxy_answer(session, "169.254.169.254:80"))
        self.assertIn("is a loopback address", self.proxy_answer(session, "127.0.0.1:22"))

    def test_an_ip_literal_is_decided_by_address(self):
        session = self.create(network=self.policy(allow=["api.test", "1.1.1.1"]))
        code, out, err = self.run_in(session, "curl -sS https://1.1.1.1/generate_204 -o /dev/null -w '%{http_code}'; "
                                              "echo; curl -sS https://93.184.215.12/ 2>&1; true")
        self.assertTrue(out.startswith("204"), out)
        self.assertIn("403", out)  # api.test's address is not api.test

    def test_sni_and_host_must_name_the_connect_target(self):
        # Tunnelled hosts (api.test is intercepted for tenant main, whose
        # operator secret is bound to it: there the sandbox's TLS client
        # itself refuses the proxy's certificate for another name).
        session = self.create(network=self.policy(allow=["one.test", "other.test"]))
        script = r"""
import socket, ssl
def tunnel(target):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    assert s.recv(4096).startswith(b"HTTP/1.1 200"), "not established"
    return s
# TLS asking for another name than the tunnel's.
s = tunnel("other.test:443")
try:
    ssl.create_default_context().wrap_socket(s, server_hostname="one.test").sendall(b"GET / HTTP/1.1\r\n\r\n")
    print("sni: passed")
except Exception as e:
    print("sni: refused")
# Plain HTTP naming another Host than the tunnel's: the proxy answers why.
s = tunnel("one.test:80")
s.sendall(b"GET /headers HTTP/1.1\r\nHost: other.test\r\n\r\n")
answer = s.recv(4096)
print("host:", "refused" if answer.startswith(b"HTTP/1.1 403") and b"domain fronting is refused" in answer
      else "passed %r" % answer[:100])
"""
        code, out, err = self.run_in(session, "python3 - <<'EOF'\n%s\nEOF" % script)
        self.assertIn("sni: refused", out, err)
        self.assertIn("host: refused", out, err)
        self.assertRegex(WORLD.log_text(), r"session=%s host=other.test port=443 .*domain fronting" % session.id)
        self.assertRegex(WORLD.log_text(), r"session=%s host=one.test port=80 .*domain fronting" % session.id)

    def test_redirects_are_checked_at_every_hop(self):
        session = self.create(network=self.policy(allow=["api.test"]))
        code, out, err = self.run_in(session, "curl -sS -L -o /dev/null -w '%{http_code}' "
                                              "'https://api.test/redirect?to=https://one.test/' 2>&1; true")
        self.assertIn("403", out)  # the second hop's CONNECT

    def test_no_dns_no_raw_socket_no_udp_from_inside(self):
        session = self.create(network=self.policy(allow=["*"]))
        script = r"""
import socket, errno
try:
    socket.getaddrinfo("api.test", 443); print("dns: resolved")
except socket.gaierror:
    print("dns: none")
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print("raw: made")
except OSError as e:
    print("raw: refused", errno.errorcode.get(e.errno))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("8.8.8.8", 53)); print("udp: sent")
except OSError as e:
    print("udp: refused", errno.errorcode.get(e.errno))
try:
    socket.create_connection(("93.184.215.12", 443), timeout=3); print("tcp: connected")
except OSError as e:
    print("tcp: refused")
"""
        code, out, err = self.run_in(session, "python3 - <<'EOF'\n%s\nEOF" % script)
        self.assertIn("dns: none", out, err)
        self.assertIn("raw: refused", out, err)
        self.assertIn("udp: refused", out, err)
        self.assertIn("tcp: refused", out, err)

    def test_the_byte_limit_ends_a_download_and_refuses_more(self):
        session = self.create(tenant="narrow", network=self.policy(allow=["*"]))
        code, out, err = self.run_in(session, "curl -sS -o /dev/null http://one.test/big?2000000 2>&1; echo; "
                                              "curl -sS http://one.test/ 2>&1; true", tenant="narrow")
        self.assertIn("max_bytes_per_session", out)
        self.assertRegex(WORLD.log_text(), r"session=%s host=one.test .*byte limit" % session.id)

    def test_the_tenants_ceiling_narrows_what_a_session_asks_for(self):
        session = self.create(tenant="narrow", network=self.policy(allow_by_default=True))
        code, out, err = self.run_in(session, "curl -sS https://api.test/generate_204 -o /dev/null -w '%{http_code}'; "
                                              "echo; curl -sS https://dns.test/ 2>&1; true", tenant="narrow")
        self.assertTrue(out.startswith("204"), out + err)
        self.assertIn("egress.tenants.narrow", self.proxy_answer(session, "dns.test:443", tenant="narrow"))

    def test_one_sessions_channel_is_its_own(self):
        open_session = self.create(network=self.policy(allow=["*"]))
        closed_session = self.create(language=self.pb.LANGUAGE_BASH)
        self.assertIn("hello", self.run_in(open_session, "curl -sS https://one.test/")[1])
        # The closed one's proxy is its own: the same port, its own rules.
        answer = self.proxy_answer(closed_session, "one.test:443")
        self.assertIn("403", answer)
        self.assertIn("session %s has no network policy" % closed_session.id, answer)
        self.assertRegex(WORLD.log_text(), r"session=%s host=one.test port=443 .*decision=refused" % closed_session.id)

    def test_update_network_changes_the_next_connection(self):
        session = self.create(network=self.policy(allow=["one.test"]), language=self.pb.LANGUAGE_BASH)
        self.assertIn("hello", self.run_in(session, "curl -sS https://one.test/")[1])
        WORLD.stub.UpdateNetwork(self.pb.UpdateNetworkRequest(session_id=session.id,
                                                              network=self.policy(allow=["dns.test"])),
                                 metadata=self.md(), timeout=RPC_TIMEOUT)
        code, out, err = self.run_in(session, "curl -sS https://one.test/ 2>&1; curl -sS https://dns.test/; true")
        self.assertIn("403", out)
        self.assertIn("hello from dns.test", out)
        WORLD.stub.UpdateNetwork(self.pb.UpdateNetworkRequest(session_id=session.id), metadata=self.md(),
                                 timeout=RPC_TIMEOUT)
        self.assertIn("no network policy", self.proxy_answer(session, "dns.test:443"))

    def test_cli_gives_changes_and_takes_away_a_sessions_network(self):
        """The real `warden` CLI: session create --allow, session network, session show."""
        env = dict(os.environ, WARDEN_ADDR="unix:%s" % WORLD.socket, WARDEN_TOKEN=WORLD.tokens["main"])

        def cli(*args):
            done = subprocess.run([str(BIN / "warden"), *args], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            return done.stdout

        session = self.pb.Session(id=cli("session", "create", "--machine", "--language", "bash",
                                         "--allow", "one.test").strip())
        self.addCleanup(self.close_session, session.id, "main")
        self.assertIn("hello", self.run_in(session, "curl -sS https://one.test/")[1])
        self.assertEqual(cli("session", "network", session.id, "--allow", "dns.test"), "network: allow dns.test\n")
        code, out, err = self.run_in(session, "curl -sS https://one.test/ 2>&1; curl -sS https://dns.test/; true")
        self.assertIn("403", out)
        self.assertIn("hello from dns.test", out)
        self.assertEqual(cli("session", "network", session.id, "--none"), "network: none\n")
        code, out, err = self.run_in(session, "curl -sS https://dns.test/ 2>&1; true")
        self.assertIn("403", out)
        self.assertNotIn("hello from dns.test", out)
        shown = json.loads(cli("session", "show", session.id, "--json"))
        self.assertEqual(shown["network"]["allow"], [])
        self.assertFalse(shown["network"]["allow_by_default"])
        self.assertEqual(shown["network_usage"]["connections"], 2, shown)
        self.assertEqual(shown["network_usage"]["refused"], 2, shown)
        self.assertRegex(cli("session", "show", session.id), r"\nnetwork: +none\n")

    # ---- Exposed ports

    def port_request(self, session_id, port, headers=None, path="/", host=None):
        host = host or "%d-%s.sandbox.test" % (port, session_id)
        request = urllib.request.Request("http://127.0.0.1:%d%s" % (WORLD.http_port, path), headers=headers or {})
        request.add_header("Host", host)
        try:
            with urllib.request.urlopen(request, timeout=20) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def wait_listening(self, session, port):
        code, out, err = self.run_in(session, "for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null "
                                              "&& exit 0; sleep 0.1; done; exit 1" % port)
        self.assertEqual(code, 0, "nothing listened on port %d" % port)

    def test_exposed_http_port_with_and_without_tokens(self):
        session = self.create()
        WORLD.stub.RunCommand(self.pb.RunCommandRequest(
            session_id=session.id, argv=["python3", "-m", "http.server", "8000"], background=True),
            metadata=self.md(), timeout=RPC_TIMEOUT).__next__()
        self.wait_listening(session, 8000)
        status, body = self.port_request(session.id, 8000)
        self.assertEqual(status, 403, body)
        self.assertIn("need a token", body)
        status, body = self.port_request(session.id, 8000, {"Authorization": "Bearer " + WORLD.tokens["main"]})
        self.assertEqual(status, 200, body)
        status, body = self.port_request(session.id, 8000, {"X-Warden-Traffic-Token": session.traffic_token})
        self.assertEqual(status, 200, body)
        # Another tenant's token is no key to it, nor a wrong traffic token.
        status, _ = self.port_request(session.id, 8000, {"Authorization": "Bearer " + WORLD.tokens["narrow"]})
        self.assertEqual(status, 502)
        status, _ = self.port_request(session.id, 8000, {"X-Warden-Traffic-Token": "x" * 48})
        self.assertEqual(status, 403)
        # The path form, on the front's own Host.
        status, body = self.port_request(session.id, 8000, {"X-Warden-Traffic-Token": session.traffic_token},
                                         path="/ports/%s/8000/" % session.id, host="127.0.0.1")
        self.assertEqual(status, 200, body)
        # A port nothing listens on; a session that does not exist.
        status, body = self.port_request(session.id, 8001, {"X-Warden-Traffic-Token": session.traffic_token})
        self.assertEqual(status, 502)
        self.assertIn("nothing listens on port 8001", body)
        status, body = self.port_request("s-000000000000000000000000", 8000)
        self.assertEqual((status, json.loads(body)["message"]), (502, "The sandbox was not found"))

    def test_public_ports_and_the_host_header(self):
        session = self.create(ports=self.pb.PortAccess(public=True, host_header="app.example:${PORT}"))
        WORLD.stub.RunCommand(self.pb.RunCommandRequest(session_id=session.id, argv=["python3", "-c", (
            "import http.server\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        body = self.headers['Host'].encode()\n"
            "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
            "        self.wfile.write(body)\n"
            "http.server.HTTPServer(('', 8080), H).serve_forever()\n")], background=True),
            metadata=self.md(), timeout=RPC_TIMEOUT).__next__()
        self.wait_listening(session, 8080)
        status, body = self.port_request(session.id, 8080)
        self.assertEqual((status, body), (200, "app.example:8080"))

    def test_a_websocket_through_an_exposed_port(self):
        session = self.create()
        WORLD.stub.RunCommand(self.pb.RunCommandRequest(session_id=session.id, argv=["python3", "-c", (
            "from aiohttp import web\n"
            "async def ws(request):\n"
            "    s = web.WebSocketResponse(); await s.prepare(request)\n"
            "    async for m in s: await s.send_str('echo:' + m.data)\n"
            "    return s\n"
            "app = web.Application(); app.router.add_get('/ws', ws)\n"
            "web.run_app(app, port=8765, print=None)\n")], background=True),
            metadata=self.md(), timeout=RPC_TIMEOUT).__next__()
        self.wait_listening(session, 8765)
        script = (
            "import aiohttp, asyncio, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s:\n"
            "        async with s.ws_connect('http://127.0.0.1:%d/ws', headers={'Host': '8765-%s.sandbox.test',\n"
            "                                 'X-Warden-Traffic-Token': '%s'}) as ws:\n"
            "            for word in ('one', 'two'):\n"
            "                await ws.send_str(word); print((await ws.receive()).data)\n"
            "asyncio.run(main())\n") % (WORLD.http_port, session.id, session.traffic_token)
        out = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.split(), ["echo:one", "echo:two"], out.stderr)

    def test_ports_close_with_hibernation_and_reopen_on_wake(self):
        session = self.create(shared=False)
        server = ("import http.server, threading\n"
                  "srv = http.server.HTTPServer(('127.0.0.1', 8090), http.server.SimpleHTTPRequestHandler)\n"
                  "threading.Thread(target=srv.serve_forever, daemon=True).start()\n")
        execute = lambda code: WORLD.stub.Execute(self.pb.ExecuteRequest(session_id=session.id, code=code),
                                                  metadata=self.md(), timeout=RPC_TIMEOUT)
        self.assertEqual(execute(server).outcome, self.pb.OUTCOME_OK)
        token = {"X-Warden-Traffic-Token": session.traffic_token}
        self.assertEqual(self.port_request(session.id, 8090, token)[0], 200)
        # A server thread keeps it from hibernating; once stopped, it hibernates.
        self.assertEqual(execute("srv.shutdown(); srv.server_close(); del srv\n").outcome, self.pb.OUTCOME_OK)
        deadline = time.monotonic() + 30
        while WORLD.stub.GetSession(self.pb.GetSessionRequest(session_id=session.id), metadata=self.md(),
                                    timeout=RPC_TIMEOUT).state != self.pb.SESSION_STATE_HIBERNATED:
            self.assertLess(time.monotonic(), deadline, "the session did not hibernate")
            time.sleep(0.3)
        # The port wakes it; nothing listens in the woken sandbox until the server starts again.
        status, body = self.port_request(session.id, 8090, token)
        self.assertEqual(status, 502, body)
        self.assertIn("nothing listens", body)
        self.assertEqual(execute(server).outcome, self.pb.OUTCOME_OK)
        self.assertEqual(self.port_request(session.id, 8090, token)[0], 200)

    # ---- The E2B SDK's network calls, against this daemon

    def test_e2b_sdk_network(self):
        if not (REPO / "tests" / "e2b" / "node_modules" / "e2b").exists():
            self.fail("the E2B SDK is not installed in tests/e2b: run `make test-deps`")
        env = dict(os.environ, E2B_API_URL="http://127.0.0.1:%d" % WORLD.http_port,
                   E2B_SANDBOX_URL="http://127.0.0.1:%d" % WORLD.http_port, E2B_API_KEY=WORLD.tokens["main"],
                   E2B_DOMAIN="sandbox.test", WARDEN_HTTP_PORT=str(WORLD.http_port),
                   WARDEN_RECORDER="93.184.215.12", WARDEN_TEST_CA=str(WORLD.ca_file))
        out = subprocess.run(["/usr/bin/node", "--test", str(REPO / "tests" / "e2b" / "e2b_network_test.mjs")],
                             env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout[-6000:] + out.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
