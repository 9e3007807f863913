"""A three-node Docker Swarm on one machine, for the fleet test
(docs/fleet.md, ../shared/research/fleet-engines.md measured each step):

- a bridge in a network namespace of its own, and one namespace per node
  (10.252.0.11-13) plus one for the test's client (10.252.0.10); nothing
  in the host's namespace;
- one dockerd per node, started with `nsenter --net` (not `ip netns exec`,
  which remounts /sys and hides the cgroup v1 mounts), each with its own
  data and exec roots, socket, cgroup parent (inside this process's own
  cgroup) and the seccomp profile deploy/seccomp/wardend.json;
- the three joined as managers, so that any one can be lost;
- the image imported on each engine (no registry), and the stack
  deploy/swarm/warden-stack.yml deployed as it is.

Everything it makes is removed by teardown(), which also runs first, for
what an earlier run that was killed left behind.
"""
import ctypes
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import fleet_harness as fh

DOCKER = "/usr/bin/docker"
DOCKERD = "/usr/sbin/dockerd"
SUBNET = "10.252.0"
CLONE_NEWNET = 0x40000000


def sh(*argv, check=True, env=None, timeout=300):
    result = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(str(a) for a in argv), result.returncode,
                                                    result.stdout[-3000:]))
    return result.stdout


class Swarm:
    def __init__(self, build_dir, nodes=3):
        self.build_dir = pathlib.Path(build_dir).resolve()
        # Names of our own, per checkout: two checkouts may test at once.
        tag = hashlib.sha1(str(self.build_dir).encode()).hexdigest()[:6]
        self.prefix = "wf" + tag
        self.count = nodes
        self.base = pathlib.Path("/var/tmp") / self.prefix  # short: containerd's socket paths
        self.bridge_ns = self.prefix + "-br"
        self.client_ns = self.prefix + "-c"
        self.node_ns = ["%s-n%d" % (self.prefix, i) for i in range(1, nodes + 1)]
        self.ips = ["%s.%d" % (SUBNET, 11 + i) for i in range(nodes)]
        memory = next(line.split(":", 2)[2] for line in fh.read("/proc/self/cgroup").splitlines()
                      if line.split(":")[1] == "memory")
        # Our own cgroup (cgroups are made only inside it): the memory
        # hierarchy's path, which in the others is inside their root.
        self.cgroup_parent = ["%s/%s-n%d" % (memory.rstrip("/"), self.prefix, i) for i in range(1, nodes + 1)]
        self.engines = [None] * nodes
        self.node_ids = [None] * nodes

    # ---- names

    def sock(self, i):
        return self.base / ("n%d" % (i + 1)) / "docker.sock"

    def env(self, i):
        return dict(os.environ, DOCKER_HOST="unix://%s" % self.sock(i))

    def docker(self, i, *argv, check=True, env=None, timeout=300):
        e = self.env(i)
        e.update(env or {})
        return sh(DOCKER, *argv, check=check, env=e, timeout=timeout)

    # ---- bring up

    def topology(self):
        sh("ip", "netns", "add", self.bridge_ns)
        sh("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")
        for ns, ip, port in [(n, a, "p%d" % i) for i, (n, a) in enumerate(zip(self.node_ns, self.ips))] + \
                [(self.client_ns, "%s.10" % SUBNET, "pc")]:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.bridge_ns)
            sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0")
            sh("ip", "-n", self.bridge_ns, "link", "set", port, "up")

    def start_engine(self, i, profile):
        d = self.base / ("n%d" % (i + 1))
        d.mkdir(parents=True, exist_ok=True)
        log = open(d / "dockerd.log", "ab")
        self.engines[i] = subprocess.Popen(
            ["nsenter", "--net=/var/run/netns/" + self.node_ns[i], DOCKERD, "--data-root", str(d / "data"),
             "--exec-root", str(d / "exec"), "-H", "unix://%s" % self.sock(i), "--pidfile", str(d / "docker.pid"),
             "--cgroup-parent", self.cgroup_parent[i], "--storage-driver", "overlay2",
             "--seccomp-profile", str(profile), "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        fh.wait_until(lambda: self.docker(i, "info", "--format", "{{.ServerVersion}}", check=False,
                                          timeout=10).strip()[:2].isdigit(),
                      60, "dockerd of node %d" % (i + 1), interval=0.2)

    def form_swarm(self):
        self.docker(0, "swarm", "init", "--advertise-addr", self.ips[0], "--listen-addr", self.ips[0] + ":2377",
                    "--dispatcher-heartbeat", "1s")
        token = self.docker(0, "swarm", "join-token", "-q", "manager").strip()
        for i in range(1, self.count):
            self.docker(i, "swarm", "join", "--token", token, "--advertise-addr", self.ips[i],
                        "--listen-addr", self.ips[i] + ":2377", self.ips[0] + ":2377")
        for i in range(self.count):
            self.node_ids[i] = self.docker(i, "info", "--format", "{{.Swarm.NodeID}}").strip()

    def up(self, profile):
        self.teardown()
        self.base.mkdir(parents=True)
        self.topology()
        for i in range(self.count):
            self.start_engine(i, profile)
        self.form_swarm()

    def import_image(self, tar, tag, marker=None):
        """`docker import` on every engine; `marker` makes it a distinct image."""
        changes = ["--change", "LABEL warden.image=%s" % (marker or tag)]
        for i in range(self.count):
            with open(tar, "rb") as f:
                out = subprocess.run([DOCKER, "import"] + changes + ["-", tag], stdin=f, env=self.env(i),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if out.returncode != 0:
                raise RuntimeError("docker import on node %d: %s" % (i + 1, out.stdout))

    def deploy(self, stack_file, name, env):
        return self.docker(0, "stack", "deploy", "--resolve-image", "never", "-c", stack_file, name, env=env)

    def enter_client_namespace(self):
        """This process (its main thread, and what it starts later) talks
        from the client's namespace from now on. Before any other thread."""
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        fd = os.open("/var/run/netns/" + self.client_ns, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into " + self.client_ns)
        finally:
            os.close(fd)

    def settled(self):
        """Whether the swarm's control plane is whole again, as engine 0 sees
        it: every node Ready and Active, one leader, every manager reachable.
        After a manager's loss the leader that takes over marks every node
        Unknown until its agent opens a session with it (agents retry with a
        backoff of up to 8 s); an update made meanwhile races the
        orchestrator, which may end the updater's new task before it runs,
        and `failure_action: pause` then stops the update for good."""
        rows = [line.split() for line in self.docker(0, "node", "ls", "--format",
                                                     "{{.Status}} {{.Availability}} {{.ManagerStatus}}",
                                                     check=False, timeout=30).splitlines()]
        return (len(rows) == self.count and all(r[:2] == ["Ready", "Active"] and len(r) == 3 for r in rows)
                and sorted(r[2] for r in rows) == ["Leader"] + ["Reachable"] * (self.count - 1))

    # ---- faults

    def node_pids(self, i):
        """Every process of node i: in its network namespace (dockerd,
        containerd, shims, proxies) or in its cgroups (the containers)."""
        pids = set()
        out = sh("ip", "netns", "pids", self.node_ns[i], check=False)
        pids.update(int(p) for p in out.split() if p.isdigit())
        root = pathlib.Path("/sys/fs/cgroup/pids") / self.cgroup_parent[i].lstrip("/")
        if root.is_dir():
            for procs in root.rglob("cgroup.procs"):
                try:
                    pids.update(int(p) for p in procs.read_text().split())
                except OSError:
                    pass
        pids.discard(os.getpid())
        return pids

    def kill_node(self, i):
        """kill -9 of the whole node: its engine and everything under it."""
        for _ in range(50):
            pids = self.node_pids(i)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        if self.engines[i]:
            self.engines[i].wait()
            self.engines[i] = None

    def restart_engine(self, i, profile):
        d = self.base / ("n%d" % (i + 1))
        self.unmount_under(d)
        # The killed engine's pid files: dockerd would take a reused pid for
        # a containerd still running, and wait for it in vain.
        for stale in (d / "docker.pid", d / "exec" / "containerd" / "containerd.pid"):
            if stale.exists():
                stale.unlink()
        self.start_engine(i, profile)

    # ---- teardown

    def cgroups(self):
        """The engines' cgroup parents, in every hierarchy where they exist."""
        out = []
        for parent in self.cgroup_parent:
            for controller in pathlib.Path("/sys/fs/cgroup").iterdir():
                group = controller / parent.lstrip("/")
                if not controller.is_symlink() and group.is_dir():
                    out.append(group)
        return out

    @staticmethod
    def unmount_under(path):
        prefix = str(path).rstrip("/") + "/"
        for _ in range(5):
            mounts = [line.split()[4] for line in fh.read("/proc/self/mountinfo").splitlines()]
            mine = sorted({m for m in mounts if m.startswith(prefix)}, key=len, reverse=True)
            if not mine:
                return
            for m in mine:
                subprocess.run(["umount", "-l", m], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def teardown(self):
        """Removes everything this harness makes, whatever state it is in."""
        for i in range(self.count):
            if self.sock(i).exists():
                self.docker(i, "swarm", "leave", "--force", check=False, timeout=30)
        for i in range(self.count):
            if os.path.exists("/var/run/netns/" + self.node_ns[i]):
                self.kill_node(i)
        self.engines = [None] * self.count
        self.unmount_under(self.base)
        for ns in self.node_ns + [self.client_ns, self.bridge_ns]:
            if os.path.exists("/var/run/netns/" + ns):
                sh("ip", "netns", "del", ns, check=False)
        for group in self.cgroups():
            for d in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(str(p)),
                            reverse=True) + [group]:
                try:
                    d.rmdir()
                except OSError:
                    pass
        # dockerd makes the parent's path in every hierarchy; where this
        # process is not inside it (it is at the root of all but memory),
        # those directories are the engines' too.
        own = {line.split(":")[1]: line.split(":", 2)[2] for line in fh.read("/proc/self/cgroup").splitlines()}
        for controller in pathlib.Path("/sys/fs/cgroup").iterdir():
            if controller.is_symlink() or not controller.is_dir():
                continue
            mine = next((v for k, v in own.items() if controller.name in k.split(",")), "/")
            chain = pathlib.PurePosixPath(self.cgroup_parent[0]).parent
            while str(chain) not in ("/", "."):
                if not (mine + "/").startswith(str(chain) + "/"):
                    try:
                        (controller / str(chain).lstrip("/")).rmdir()
                    except OSError:
                        pass
                chain = chain.parent
        if self.base.exists():
            shutil.rmtree(self.base, ignore_errors=True)

    def leftovers(self):
        """What teardown() failed to remove (the test asserts there is none)."""
        left = [ns for ns in self.node_ns + [self.client_ns, self.bridge_ns] if os.path.exists("/var/run/netns/" + ns)]
        prefix = str(self.base) + "/"
        left += [line.split()[4] for line in fh.read("/proc/self/mountinfo").splitlines()
                 if line.split()[4].startswith(prefix)]
        left += [str(group) for group in self.cgroups()]
        if self.base.exists():
            left.append(str(self.base))
        return left


def write_fleet_files(config_dir, shared_in_container="/var/lib/warden/shared"):
    """tokens, certificates and both configurations, as the stack mounts them."""
    config_dir = pathlib.Path(config_dir)
    pki = fh.make_pki(config_dir / "pki", node_ips=(), gateway_ips=["%s.%d" % (SUBNET, 11 + i) for i in range(3)])
    for name in ("node.pem", "node.key", "gateway-ca.pem", "node-ca.pem", "gateway.pem", "gateway.key",
                 "gateway-server.pem", "gateway-server.key", "client-ca.pem"):
        shutil.copy(pki / name, config_dir / name)
    fh.write_tokens(config_dir / "tokens.json")
    (config_dir / "front.key").write_text(os.urandom(32).hex() + "\n")
    secret = lambda p: "/run/secrets/" + pathlib.Path(p).name  # noqa: E731
    node = fh.node_config(pki, config_dir / "tokens.json", None, shared_in_container, "0.0.0.0:7443",
                          state_dir="/run/warden", paths=lambda p: secret(p) if str(p).startswith(str(config_dir))
                          else str(p), hibernate_after=0,
                          extra={"kernels_dir": "/usr/lib/warden/kernels", "shutdown_grace_ms": 20000})
    node["fleet"]["shared_dir"] = shared_in_container
    # The image has no Node.js (a smaller image; the test needs none).
    node["pools"] = [p for p in node["pools"] if p["language"] != "javascript"]
    (config_dir / "wardend.json").write_text(json.dumps(node, indent=1))
    gateway = fh.gateway_config(pki, config_dir / "tokens.json", {"dns": "tasks.wardend", "port": 7443},
                                "0.0.0.0:50051", http_listen="0.0.0.0:8080",
                                paths=lambda p: secret(p), tls=True, e2b_key_file=config_dir / "front.key")
    gateway["allow_insecure_loopback"] = False
    (config_dir / "warden-gateway.json").write_text(json.dumps(gateway, indent=1))
    return pki
