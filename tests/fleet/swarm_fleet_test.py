"""A Warden fleet on a real engine: three dockerd joined as a swarm of three
managers, wardend as a global service and warden-gateway (two replicas)
from deploy/swarm/warden-stack.yml, the image built from Debian's packages
and the project's .deb (image_root.py) and imported on each engine
(swarm.py). Then, through the gateway, as users would:

  spread and state; the E2B SDK, the MCP SDK and the Python client,
  unmodified; a node drained under load (every Python session answers
  afterwards with its state, from another node, and no call fails that the
  client's documented retry would not absorb); kill -9 of a whole node
  (its sessions fail fast, new work lands elsewhere, and when it returns no
  session exists twice); a rolling update of wardend to a new image that
  keeps every capturable session; tenant isolation.

Everything it made (namespaces, engines, mounts, cgroups) is removed at
the end, also when it fails. Needs root and Debian's docker.io
(`make test-fleet` installs it); the .deb it makes of the build tree
(scripts/make_deb.sh). docs/fleet.md.
"""
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fleet_harness as fh  # noqa: E402
import kubernetes_pod  # noqa: E402
import swarm as sw  # noqa: E402

BIN = pathlib.Path(os.environ.get("WARDEN_BIN_DIR", fh.ROOT / "build" / "bin"))
BUILD = BIN.parent
STACK = fh.ROOT / "deploy" / "swarm" / "warden-stack.yml"
PROFILE = fh.ROOT / "deploy" / "seccomp" / "wardend.json"
NAME = "warden"
TIMEOUT = 120
TIMINGS = {}


def timed(what):
    class Timer:
        def __enter__(self):
            self.start = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[what] = round(time.monotonic() - self.start, 1)
    return Timer()


# The host uid that owns each sandbox init's user namespace
# (NS_GET_OWNER_UID), run in a wardend container.
NAMESPACE_OWNERS = r"""
import fcntl, os, struct
owners = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open("/proc/%s/comm" % pid) as comm:
            if comm.read().strip() != "warden-sandbox":
                continue
        fd = os.open("/proc/%s/ns/user" % pid, os.O_RDONLY)
    except OSError:
        continue
    try:
        owners.append(struct.unpack("I", fcntl.ioctl(fd, 0xb704, bytes(4)))[0])
    finally:
        os.close(fd)
print(" ".join(map(str, owners)))
"""


class SwarmFleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(sw.DOCKERD, os.X_OK):
            raise AssertionError("this test needs Debian's docker.io: run `make test-fleet` (it installs it)")
        cls.swarm = sw.Swarm(BUILD)
        cls.tmp = tempfile.mkdtemp(prefix="fleet-swarm-")
        try:
            cls.bring_up()
        except BaseException:
            cls.save_logs()
            cls.swarm.teardown()
            raise

    @classmethod
    def bring_up(cls):
        image = BUILD / "fleet" / "warden-image.tar"
        image.parent.mkdir(exist_ok=True)
        # The .deb of this build tree's programs, made here as deb_test.sh
        # does: a .deb left in build/deb/ by an earlier `make deb` would put
        # older programs in the image than the configuration is written for.
        debs = BUILD / "fleet" / "deb"
        shutil.rmtree(debs, ignore_errors=True)
        with timed(".deb of the build tree"):
            deb = subprocess.run([str(fh.ROOT / "scripts" / "make_deb.sh"), str(BUILD), str(debs)], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
        with timed("image root from Debian packages"):
            subprocess.run(["/usr/bin/python3", str(pathlib.Path(__file__).parent / "image_root.py"), deb,
                            str(image), "--cache", str(BUILD / "fleet" / "debs")], check=True)
        with timed("network namespaces, 3 engines, swarm of 3 managers"):
            cls.swarm.up(PROFILE)
        with timed("docker import on 3 engines (x2 images)"):
            cls.swarm.import_image(image, "warden:1")
            cls.swarm.import_image(image, "warden:2", marker="2")
        config = pathlib.Path(cls.tmp) / "config"
        config.mkdir()
        cls.pki = sw.write_fleet_files(config)
        cls.config = config
        shared = cls.swarm.base / "shared"
        shared.mkdir()
        cls.env = {"WARDEN_IMAGE": "warden:1", "WARDEN_CONFIG_DIR": str(config), "WARDEN_SHARED_DIR": str(shared)}
        with timed("stack deployed, every task running"):
            cls.swarm.deploy(STACK, NAME, cls.env)
            gateways = cls.wait_for_tasks(3, 2)
        cls.swarm.enter_client_namespace()
        import grpc  # noqa: F401 - after setns: its threads are born in the client's namespace
        cls.pb, cls.pb_grpc, cls.fpb, cls.fpb_grpc = fh.stubs(BUILD)
        cls.gateway_node = sorted(gateways)[0]
        cls.gateway_ip = cls.swarm.ips[cls.gateway_node]
        with timed("gateway sees 3 nodes"):
            fh.wait_until(lambda: cls.nodes_up() == 3, TIMEOUT, "the gateway reaching 3 nodes", interval=0.5)

    @classmethod
    def tearDownClass(cls):
        cls.save_logs()
        cls.swarm.teardown()
        left = cls.swarm.leftovers()
        print("timings (s): %s" % json.dumps(TIMINGS), file=sys.stderr)
        if left:
            raise AssertionError("the swarm harness left %s" % left)

    @classmethod
    def save_logs(cls):
        """Every container's and engine's log outlives the swarm, for a look
        after a failure (build/fleet/logs)."""
        logs = BUILD / "fleet" / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        for i in range(cls.swarm.count):
            try:
                listing = cls.swarm.docker(i, "ps", "-a", "--format", "{{.ID}} {{.Names}}", check=False, timeout=30)
            except subprocess.TimeoutExpired:
                listing = ""
            for line in listing.splitlines():
                if len(line.split()) != 2:
                    continue
                cid, name = line.split()
                out = cls.swarm.docker(i, "logs", "--timestamps", cid, check=False, timeout=30)
                with (logs / ("n%d-%s.log" % (i + 1, name.split(".")[0]))).open("a") as f:
                    f.write(out)
            engine_log = cls.swarm.base / ("n%d" % (i + 1)) / "dockerd.log"
            if engine_log.exists():
                shutil.copy(engine_log, logs / ("n%d-dockerd.log" % (i + 1)))
        # What the managers think of the nodes and the tasks (the engines log
        # warnings only): why a node got no task, say.
        for i in range(cls.swarm.count):
            try:
                nodes = cls.swarm.docker(i, "node", "ls", check=False, timeout=30)
                tasks = cls.swarm.docker(i, "service", "ps", "--no-trunc", "%s_wardend" % NAME, check=False, timeout=30)
            except subprocess.TimeoutExpired:
                continue
            if nodes.strip():
                (logs / "swarm-state.txt").write_text("as node %d sees it:\n%s\n%s" % (i + 1, nodes, tasks))
                break

    # ---- helpers

    @classmethod
    def running(cls, service):
        """Node indexes where `service`'s tasks run now."""
        out = cls.swarm.docker(0, "service", "ps", "%s_%s" % (NAME, service), "-q", "--filter",
                               "desired-state=running", check=False)
        nodes = []
        for task in out.split():
            info = cls.swarm.docker(0, "inspect", "--format", "{{.NodeID}} {{.Status.State}}", task, check=False).split()
            if len(info) == 2 and info[1] == "running" and info[0] in cls.swarm.node_ids:
                nodes.append(cls.swarm.node_ids.index(info[0]))
        return nodes

    @classmethod
    def tasks(cls, service):
        """Every task of `service`: node, state and error, for a failure's message."""
        return cls.swarm.docker(0, "service", "ps", "--no-trunc", "--format",
                                "{{.Name}} {{.Image}} {{.DesiredState}} {{.CurrentState}} {{.Error}}",
                                "%s_%s" % (NAME, service), check=False)

    @classmethod
    def wait_for_tasks(cls, wardend, gateways):
        """Waits until `wardend` and `gateways` tasks run, and stay running
        over two looks a second apart (a task that exits at once, say on a
        configuration it rejects, is running for a moment before it fails);
        returns the gateways' node indexes."""
        def settled():
            looks = []
            for look in range(2):
                if look:
                    time.sleep(1)
                looks.append((sorted(cls.running("wardend")), sorted(cls.running("gateway"))))
            if looks[0] == looks[1] and len(looks[0][0]) == wardend and len(looks[0][1]) == gateways:
                return looks[0][1]
            return None
        try:
            return fh.wait_until(settled, TIMEOUT, "%d wardend and %d gateway tasks running" % (wardend, gateways),
                                 interval=0.5)
        except AssertionError as error:
            raise AssertionError("%s\nwardend tasks:\n%s\ngateway tasks:\n%s\n(their logs: %s)" % (
                error, cls.tasks("wardend"), cls.tasks("gateway"), BUILD / "fleet" / "logs")) from None

    @classmethod
    def settle(cls):
        """After a fault: the swarm whole again (swarm.py settled()), its
        tasks running, and the test's gateway one that runs now (the engine
        may have moved the one it used), reaching 3 nodes."""
        fh.wait_until(cls.swarm.settled, TIMEOUT, "every swarm node Ready and Active, a leader, every manager "
                      "reachable", interval=0.5)
        gateways = cls.wait_for_tasks(3, 2)
        if cls.gateway_node not in gateways:
            cls.gateway_node = gateways[0]
            cls.gateway_ip = cls.swarm.ips[cls.gateway_node]
        fh.wait_until(lambda: cls.nodes_up() == 3, TIMEOUT, "the gateway reaching 3 nodes", interval=0.5)

    @classmethod
    def channel(cls, ip=None):
        import grpc
        creds = grpc.ssl_channel_credentials(root_certificates=(cls.pki / "client-ca.pem").read_bytes())
        return grpc.secure_channel("%s:50051" % (ip or cls.gateway_ip), creds)

    @classmethod
    def nodes_up(cls):
        with cls.channel() as channel:
            status = cls.fpb_grpc.NodeStub(channel).GetNodeStatus(
                cls.fpb.GetNodeStatusRequest(), metadata=(("authorization", "Bearer " + fh.ALICE),), timeout=5)
            return len([n for n in status.nodes if not n.draining])

    def client(self, token=fh.ALICE, retries=True):
        import warden
        return warden.Client("%s:50051" % self.gateway_ip, token=token, retries=retries,
                             tls=warden.TlsFiles(ca_file=str(self.pki / "client-ca.pem")))

    def node_index(self, session_id):
        return self.swarm.node_ids.index(fh.node_of(session_id).lower()) if fh.node_of(session_id) else -1

    # ---- the scenarios, in order

    def test_a_sessions_spread_and_keep_their_state(self):
        with self.client() as client:
            sessions = [client.session() for _ in range(9)]
            nodes = {fh.node_of(s.id) for s in sessions}
            self.assertLessEqual(nodes, set(self.swarm.node_ids), "session ids carry the Swarm node id")
            self.assertGreaterEqual(len(nodes), 2)
            for i, s in enumerate(sessions):
                s.run("x = %d" % i)
            for i, s in enumerate(sessions):
                self.assertEqual(s.run("x * 2").result.text, str(i * 2))
            # With the stack's capabilities, each sandbox's user namespace
            # has an owner of its own, never the node's root, so that one
            # cannot take root's inotify instances (docs/security.md,
            # "Per-user kernel counts"); each wardend says so at start-up.
            wardends = 0
            for i in range(self.swarm.count):
                for cid in self.swarm.docker(i, "ps", "-q", "--filter", "name=%s_wardend" % NAME).split():
                    wardends += 1
                    self.assertIn("owned by a host id of its own", self.swarm.docker(i, "logs", cid))
                    owners = self.swarm.docker(i, "exec", cid, "/usr/bin/python3", "-c", NAMESPACE_OWNERS).split()
                    self.assertTrue(owners, "node %d shows no sandbox" % (i + 1))
                    self.assertNotIn("0", owners)
            self.assertEqual(wardends, self.swarm.count, "one wardend per node")
            for s in sessions:
                s.close()

    def test_b_the_e2b_and_mcp_sdks_work_through_the_gateway_unchanged(self):
        with timed("E2B + MCP SDKs"):
            out = subprocess.run(["node", str(pathlib.Path(__file__).parent / "sdks_via_gateway.mjs")],
                                 env=dict(os.environ, GATEWAY_HTTP="http://%s:8080" % self.gateway_ip,
                                          WARDEN_TOKEN=fh.ALICE),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out.stdout)
        report = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual(report["e2b"]["value"], "42")
        self.assertIn(fh.node_of(report["e2b"]["sandbox"]), self.swarm.node_ids)
        self.assertIn(fh.node_of(report["mcp"]["session"]), self.swarm.node_ids)

    def test_c_a_tenant_cannot_reach_another_tenants_session(self):
        import warden
        with self.client(fh.ALICE) as alice, self.client(fh.BOB) as bob:
            s = alice.session()
            s.run("secret = 'alice'")
            with self.assertRaises(warden.errors.NotFound):
                bob.attach(s.id)
            with self.channel() as channel, self.assertRaises(Exception) as caught:
                self.pb_grpc.ExecutorStub(channel).Execute(self.pb.ExecuteRequest(session_id=s.id, code="secret"),
                                                          metadata=(("authorization", "Bearer " + fh.BOB),),
                                                          timeout=30)
            self.assertEqual(caught.exception.code().name, "NOT_FOUND")
            self.assertNotIn(s.id, [x.id for x in bob.sessions()])
            s.close()

    def test_d_a_drained_node_hands_every_python_session_over(self):
        with self.client() as client:
            sessions = [client.session() for _ in range(12)]
            for i, s in enumerate(sessions):
                s.run("x = %d\nopen('f.txt', 'w').write('file %d')" % (i, i))
            bash = client.session("bash")
            by_node = {}
            for s in sessions + [bash]:
                by_node.setdefault(self.node_index(s.id), []).append(s)
            victim = next(n for n in sorted(by_node, key=lambda n: -len(by_node[n])) if n != self.gateway_node)
            failures, calls = [], [0]
            stop = threading.Event()

            def load(i, s):
                while not stop.is_set():
                    try:
                        r = s.run("x")
                        calls[0] += 1
                        if r.result is None or r.result.text != str(i):
                            failures.append((s.id, r.outcome, r.message))
                    except Exception as error:  # noqa: BLE001 - every failure counts
                        failures.append((s.id, repr(error)))
            threads = [threading.Thread(target=load, args=(i, s)) for i, s in enumerate(sessions)]
            for t in threads:
                t.start()
            start = time.monotonic()
            self.swarm.docker(0, "node", "update", "--availability", "drain", self.swarm.node_ids[victim])
            fh.wait_until(lambda: not self.swarm.docker(victim, "ps", "-q", "--filter", "name=%s_wardend" % NAME),
                          TIMEOUT, "the drained node's wardend gone", interval=0.3)
            TIMINGS["drain: task gone"] = round(time.monotonic() - start, 1)
            time.sleep(2)
            stop.set()
            for t in threads:
                t.join()
            self.assertEqual(failures, [], "calls failed during the drain (of %d)" % calls[0])
            for i, s in enumerate(sessions):
                r = s.run("(x, open('f.txt').read())")
                self.assertEqual(r.result.text, repr((i, "file %d" % i)), s.id)
            if self.node_index(bash.id) == victim:
                r = bash.run("echo hi")
                self.assertEqual(r.outcome, "SESSION_LOST", r.message)
                self.assertIn("drained", r.message)
            self.swarm.docker(0, "node", "update", "--availability", "active", self.swarm.node_ids[victim])
            self.settle()
            for s in sessions:
                s.close()

    def test_e_kill_9_of_a_whole_node(self):
        import warden
        with self.client(retries=False) as client:
            sessions = [client.session() for _ in range(9)]
            for i, s in enumerate(sessions):
                s.run("x = %d" % i)
            candidates = [n for n in range(3) if n != self.gateway_node and
                          any(self.node_index(s.id) == n for s in sessions)]
            victim = candidates[0]
            on_victim = [s for s in sessions if self.node_index(s.id) == victim]
            start = time.monotonic()
            self.swarm.kill_node(victim)
            fh.wait_until(lambda: self.nodes_up() == 2, 15, "the gateway noticing the lost node", interval=0.2)
            TIMINGS["kill -9: noticed by the gateway"] = round(time.monotonic() - start, 1)
            for s in on_victim:
                t = time.monotonic()
                with self.assertRaises(warden.errors.Unavailable) as caught:
                    s.run("x")
                self.assertLess(time.monotonic() - t, 5, "a call to a lost node fails fast")
                self.assertIn(fh.node_of(s.id), str(caught.exception))
            fresh = [client.session() for _ in range(4)]
            self.assertTrue(all(self.node_index(s.id) != victim for s in fresh), "new work lands elsewhere")
            for s in fresh:
                self.assertEqual(s.run("1 + 1").result.text, "2")
            # The node returns: its engine restarts, Swarm starts a new task.
            self.swarm.restart_engine(victim, PROFILE)
            try:
                fh.wait_until(lambda: self.nodes_up() == 3, TIMEOUT, "the node back", interval=0.5)
            except AssertionError as error:
                # Why: whether Swarm gave the node a task and what its wardend
                # said (build/fleet/logs has every container's whole log).
                raise AssertionError("%s\nwardend tasks:\n%s\nload: %s" % (
                    error, self.tasks("wardend"), os.getloadavg())) from None
            TIMINGS["kill -9: back"] = round(time.monotonic() - start, 1)
            listed = [x.id for x in client.sessions()]
            self.assertEqual(len(listed), len(set(listed)), "no session exists twice")
            for s in on_victim:
                with self.assertRaises(warden.errors.NotFound):
                    s.run("x")
                self.assertNotIn(s.id, listed)
            for s in sessions + fresh:
                if s not in on_victim:
                    s.close()
        self.settle()
        TIMINGS["kill -9: swarm settled"] = round(time.monotonic() - start, 1)

    def test_f_a_rolling_update_to_a_new_image_keeps_every_capturable_session(self):
        with self.client() as client:
            sessions = [client.session() for _ in range(9)]
            for i, s in enumerate(sessions):
                s.run("x = %d" % i)
            start = time.monotonic()
            self.swarm.docker(0, "service", "update", "--detach", "--no-resolve-image", "--image", "warden:2",
                              "%s_wardend" % NAME)

            def update_ended():
                status = json.loads(self.swarm.docker(0, "service", "inspect", "--format", "{{json .UpdateStatus}}",
                                                      "%s_wardend" % NAME).strip() or "null") or {}
                return status if status.get("State") not in (None, "updating") else None
            status = fh.wait_until(update_ended, 300, "the rolling update's end", interval=1)
            self.assertEqual(status.get("State"), "completed",
                             "the rolling update: %s\ntasks:\n%s" % (status, self.tasks("wardend")))
            TIMINGS["rolling update of 3 nodes"] = round(time.monotonic() - start, 1)
            images = self.swarm.docker(0, "service", "ps", "%s_wardend" % NAME, "--filter", "desired-state=running",
                                       "--format", "{{.Image}}").split()
            self.assertEqual(set(images), {"warden:2"})
            fh.wait_until(lambda: self.nodes_up() == 3, TIMEOUT, "the gateway reaching 3 nodes", interval=0.5)
            for i, s in enumerate(sessions):
                self.assertEqual(s.run("x").result.text, str(i), s.id)
            for s in sessions:
                s.close()

    def test_g_the_kubernetes_pod_as_shipped_becomes_ready(self):
        """deploy/kubernetes/'s wardend pod, its ConfigMap's configuration
        as it is, on node 1's engine (kubernetes_pod.py): the readiness
        probe turns 200 and the liveness probe answers; `wardend --check`
        passes in it, and fails naming the interpreter and the fix for a
        pool whose language the image lacks."""
        whole = time.monotonic()
        work = pathlib.Path(self.tmp) / "kubernetes"
        pod = kubernetes_pod.Pod(secrets=self.config, work=work, node_name="k8s-node-1",
                                 publish_ip=self.swarm.ips[0])
        container = "%s-k8s-wardend" % self.swarm.prefix
        self.swarm.docker(0, "tag", "warden:1", pod.image)
        self.addCleanup(self.swarm.docker, 0, "rm", "--force", container, check=False, timeout=60)
        start = time.monotonic()
        self.swarm.docker(0, *pod.run_args(container))

        def get(probe):
            path, port = pod.probes[probe]
            address = self.swarm.docker(0, "port", container, "%d/tcp" % port).split()[0]
            try:
                with urllib.request.urlopen("http://%s%s" % (address, path), timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()

        def state():
            return self.swarm.docker(0, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", container)

        def ready():
            status = state()
            if not status.startswith("running"):
                raise AssertionError("the pod's container is %s:\n%s" % (status, self.swarm.docker(
                    0, "logs", container, check=False)[-3000:]))
            return get("readinessProbe")[0] == 200
        try:
            fh.wait_until(ready, TIMEOUT, "the pod's readiness probe answering 200", interval=0.5)
        except AssertionError as error:
            raise AssertionError("%s\nlast answer: %s\nlog:\n%s" % (error, get("readinessProbe"), self.swarm.docker(
                0, "logs", container, check=False)[-3000:])) from None
        TIMINGS["kubernetes pod ready"] = round(time.monotonic() - start, 1)
        self.assertEqual(get("livenessProbe")[0], 200)

        def in_pod(*argv, stdin=""):
            return subprocess.run([sw.DOCKER, "exec", "-i", container] + list(argv), input=stdin, capture_output=True,
                                  text=True, env=self.swarm.env(0), timeout=TIMEOUT)
        check = in_pod("/usr/bin/wardend", "--config", "/etc/warden/wardend.json", "--check")
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertIn("workers:\n  python: ok", check.stdout)
        self.assertIn("  bash: ok", check.stdout)

        # A JavaScript pool in the image, which has no Node.js.
        javascript = pod.configuration()
        javascript["pools"].append({"language": "javascript", "size": 1})
        copied = in_pod("sh", "-c", "cat > /tmp/javascript.json", stdin=json.dumps(javascript))
        self.assertEqual(copied.returncode, 0, copied.stderr)
        check = in_pod("/usr/bin/wardend", "--config", "/tmp/javascript.json", "--check")
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertRegex(check.stdout, r"javascript: FAILED: .*\n    fix: /usr/bin/node is missing: .*nodejs.*"
                         r"or remove the javascript pool", check.stdout)
        TIMINGS["kubernetes pod: ready, --check twice"] = round(time.monotonic() - whole, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
