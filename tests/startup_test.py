"""wardend from a new user's point of view: where the checkout lies must not
matter, and a daemon that cannot start workers must say so.

PrivateCheckoutTest lays out a checkout (wardend, warden, the zygote and the
kernels) under directories only their owners may enter - `mktemp -d`'s 0700,
then a 0700 home of another user, as Debian 12 creates them - starts wardend
from there and runs Python, JavaScript and bash.

BrokenPoolTest gives wardend a kernels_dir without python/: `--check` and the
start-up message name the cause and the fix, readiness (/readyz and
grpc.health.v1.Health) reports NOT_SERVING, and a client asking for Python
gets UNAVAILABLE with the cause at once - the queue's wait is set to minutes,
so only the pool's own verdict can answer in time - while bash still runs.
Once python/ appears, the pool recovers and readiness with it.

SandboxProcessNamesTest looks at a running wardend's processes as an
operator's `ps` and `pidof` do: only the daemon answers to its name.
UsageTest: `warden help` with a command that does not exist exits 2.

Needs root (wardend builds sandboxes), WARDEN_BIN_DIR (build/bin) and the
repository as the working directory (for kernel/).
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN_DIR = pathlib.Path(os.environ.get("WARDEN_BIN_DIR", REPO / "build" / "bin"))
BINARIES = ("wardend", "warden", "warden-python-zygote")
# kernel/ subdirectories a kernels_dir holds: one per language, and bin/
# (pip and the other tools bound into every sandbox).
KERNEL_DIRS = ("python", "node", "bash", "bin")
# Deadlines for things that take a second or two; only a broken daemon
# waits this long.
STARTUP_TIMEOUT_S = 90
CALL_TIMEOUT_S = 60
# The queue's wait in BrokenPoolTest: a refusal that came from the wait
# running out would take this long, far past CALL_TIMEOUT_S.
LONG_WAIT_MS = 300_000

SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"  # grpc.health.v1.HealthCheckResponse


def host_ids():
    """A host id range of this test process's own (see python_client_test)."""
    return {"host_id_base": 7_000_000 + (os.getpid() % 4096) * 1024, "host_id_count": 1024}


def wait_until(what, predicate, timeout_s=STARTUP_TIMEOUT_S, describe=lambda: ""):
    """Polls predicate() until it is true or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("%s did not happen within %d s\n%s" % (what, timeout_s, describe()))
        time.sleep(0.05)


class Wardend:
    """A wardend subprocess with its log in a file."""

    def __init__(self, bin_dir, config, workdir):
        self.socket = workdir / "wardend.sock"
        self.log_path = workdir / "wardend.log"
        config = dict(config, listen=["unix:%s" % self.socket])
        config_path = workdir / "wardend.json"
        config_path.write_text(json.dumps(config))
        self.bin_dir = bin_dir
        self.config_path = config_path
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [str(bin_dir / "wardend"), "--config", str(config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_listening(self):
        def listening():
            if self.process.poll() is not None:
                raise AssertionError("wardend exited with %d:\n%s" % (self.process.returncode, self.log()))
            return "wardend listening on" in self.log() and self.socket.exists()
        wait_until("wardend listening", listening, describe=self.log)

    def admin_port(self):
        for line in self.log().splitlines():
            if "admin HTTP" in line and "on port " in line:
                return int(line.rsplit("on port ", 1)[1])
        raise AssertionError("wardend logged no admin port:\n" + self.log())

    def cli(self, *args, stdin=""):
        return subprocess.run([str(self.bin_dir / "warden"), "--addr", "unix:%s" % self.socket, *args],
                              input=stdin, capture_output=True, text=True, timeout=CALL_TIMEOUT_S)

    def health(self):
        with grpc.insecure_channel("unix:%s" % self.socket) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            return check(b"", timeout=CALL_TIMEOUT_S)

    def stop(self):
        """SIGTERM, then the exit status (killed after the deadline)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=CALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        return self.process.returncode


def readyz(port):
    """(status, body) of GET /readyz."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=CALL_TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class PrivateCheckoutTest(unittest.TestCase):

    def setUp(self):
        # mktemp -d: 0700, root's. Inside it, another user's 0700 home.
        self.top = pathlib.Path(tempfile.mkdtemp(prefix="warden-checkout-"))
        self.addCleanup(shutil.rmtree, self.top, ignore_errors=True)
        home = self.top / "home"
        home.mkdir(mode=0o700)
        os.chown(home, 4242, 4242)
        self.checkout = home / "warden"
        (self.checkout / "build" / "bin").mkdir(parents=True)
        for name in BINARIES:
            shutil.copy2(BIN_DIR / name, self.checkout / "build" / "bin" / name)
        for subdir in KERNEL_DIRS:
            shutil.copytree(REPO / "kernel" / subdir, self.checkout / "kernel" / subdir,
                            ignore=shutil.ignore_patterns("__pycache__", "test_*"))
        self.assertEqual(os.stat(self.top).st_mode & 0o777, 0o700)

    def test_a_daemon_started_from_the_checkout_runs_every_language(self):
        wardend = Wardend(self.checkout / "build" / "bin", {
            "kernels_dir": str(self.checkout / "kernel"),
            "pools": [{"language": "python", "size": 1}, {"language": "javascript", "size": 1},
                      {"language": "bash", "size": 1}],
            "executor": host_ids()}, self.top)
        self.addCleanup(wardend.stop)
        wardend.wait_listening()
        log = wardend.log()
        self.assertIn("Python zygote (pid", log)  # the zygote, from the checkout, too
        self.assertNotIn("cannot start", log)
        self.assertIn("wardend is running. Try it", log)

        python = wardend.cli("exec", "-", stdin="import sys\nprint(sys.version_info[0] * 14)\n")
        self.assertEqual((python.returncode, python.stdout), (0, "42\n"), python.stderr + wardend.log())
        node = wardend.cli("exec", "--language", "javascript", "-", stdin="console.log(6 * 7)\n")
        self.assertEqual((node.returncode, node.stdout), (0, "42\n"), node.stderr + wardend.log())
        bash = wardend.cli("exec", "--language", "bash", "-", stdin="echo $((6 * 7))\n")
        self.assertEqual((bash.returncode, bash.stdout), (0, "42\n"), bash.stderr + wardend.log())

        session = wardend.cli("session", "create")
        self.assertEqual(session.returncode, 0, session.stderr)
        sid = session.stdout.strip()
        self.assertEqual(wardend.cli("exec", "--session", sid, "-", stdin="x = 41\n").returncode, 0)
        again = wardend.cli("exec", "--session", sid, "-", stdin="print(x + 1)\n")
        self.assertEqual(again.stdout, "42\n", again.stderr)

        self.assertEqual(wardend.stop(), 0, wardend.log())


class BrokenPoolTest(unittest.TestCase):

    def setUp(self):
        self.top = pathlib.Path(tempfile.mkdtemp(prefix="warden-broken-"))
        self.addCleanup(shutil.rmtree, self.top, ignore_errors=True)
        self.kernels = self.top / "kernels"  # everything but python/
        for subdir in KERNEL_DIRS:
            if subdir != "python":
                shutil.copytree(REPO / "kernel" / subdir, self.kernels / subdir)
        self.config = {
            "kernels_dir": str(self.kernels),
            "admin_listen": "127.0.0.1:0",
            "pools": [{"language": "python", "size": 1}, {"language": "bash", "size": 1}],
            "queue": {"max_depth": 64, "max_wait_ms": LONG_WAIT_MS},
            "executor": host_ids(),
        }

    def test_check_reports_the_cause_and_the_fix(self):
        config = self.top / "check.json"
        config.write_text(json.dumps(self.config))
        check = subprocess.run([str(BIN_DIR / "wardend"), "--check", "--config", str(config)],
                               capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn("workers:\n", check.stdout)
        self.assertIn("  python: FAILED: bind source %s/python does not exist on the host\n"
                      % self.kernels, check.stdout)
        self.assertIn("    fix: set kernels_dir in the configuration", check.stdout)
        self.assertIn("  bash: ok, started in ", check.stdout)

    def test_the_daemon_says_why_and_clients_get_the_cause(self):
        wardend = Wardend(BIN_DIR, self.config, self.top)
        self.addCleanup(wardend.stop)
        wardend.wait_listening()

        # The start-up message: on stderr, with the cause and the fix.
        log = wardend.log()
        self.assertIn("wardend cannot start every kind of worker:\n"
                      "  python: FAILED: bind source %s/python does not exist on the host\n"
                      "    fix: set kernels_dir in the configuration" % self.kernels, log)
        self.assertNotIn("wardend is running. Try it", log)

        # Readiness: NOT_SERVING while python cannot start any worker.
        port = wardend.admin_port()

        def python_named():
            status, body = readyz(port)
            return (status, body) if "python workers cannot start" in body else None
        status, body = wait_until("/readyz naming python", python_named, describe=wardend.log)
        self.assertEqual(status, 503, body)
        self.assertIn("python workers cannot start: bind source", body)
        self.assertEqual(wardend.health(), NOT_SERVING)

        # The caller gets the cause now, not a retry hint when the wait runs out.
        python = wardend.cli("exec", "-", stdin="print(1)\n")
        self.assertNotEqual(python.returncode, 0)
        self.assertIn("warden: UNAVAILABLE: python workers cannot start: bind source %s/python "
                      "does not exist on the host" % self.kernels, python.stderr)
        session = wardend.cli("session", "create", "--language", "python")
        self.assertIn("UNAVAILABLE: python workers cannot start", session.stderr)
        bash = wardend.cli("exec", "--language", "bash", "-", stdin="echo still here\n")
        self.assertEqual((bash.returncode, bash.stdout), (0, "still here\n"), bash.stderr)

        # Fixed while it runs: the pool starts workers again, and is ready.
        shutil.copytree(REPO / "kernel" / "python", self.kernels / "python")
        wait_until("/readyz ready", lambda: readyz(port) == (200, "ready\n"), describe=wardend.log)
        self.assertEqual(wardend.health(), SERVING)
        python = wardend.cli("exec", "-", stdin="print(6 * 7)\n")
        self.assertEqual((python.returncode, python.stdout), (0, "42\n"), python.stderr)

        self.assertEqual(wardend.stop(), 0, wardend.log())


def proc(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read()
    except OSError:
        return b""


def descendants(root):
    """Every process under `root` (itself left out): pid -> parent pid."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc(int(entry), "stat")
            if stat:
                parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    found, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = ppid
                todo.append(pid)
    return found


class SandboxProcessNamesTest(unittest.TestCase):
    """What an operator's `ps`, `pidof` and `kill` see of a running wardend
    (sandbox/process_title.h): among its processes only the daemon answers
    to `pidof wardend`; every sandbox's init - a one-shot's, a Python
    session's (cloned from the zygote), a bash session's (cloned from
    wardend itself), a machine's - is `warden-sandbox`, a session's named
    after its id; the kernels are what they run (the zygote's in-place
    Python kernel still `python3 -u -E .../warden_kernel.py`)."""

    def setUp(self):
        self.top = pathlib.Path(tempfile.mkdtemp(prefix="warden-names-"))
        self.addCleanup(shutil.rmtree, self.top, ignore_errors=True)
        self.wardend = Wardend(BIN_DIR, {
            "kernels_dir": str(REPO / "kernel"),
            "pools": [{"language": "python", "size": 1}, {"language": "bash", "size": 1}],
            "executor": host_ids()}, self.top)
        self.addCleanup(self.wardend.stop)
        self.wardend.wait_listening()

    def session(self, *args):
        created = self.wardend.cli("session", "create", *args)
        self.assertEqual(created.returncode, 0, created.stderr + self.wardend.log())
        return created.stdout.strip()

    def test_pidof_wardend_finds_the_daemon_alone(self):
        daemon = self.wardend.process.pid
        wardend_exe = os.path.realpath(BIN_DIR / "wardend")
        python, bash, machine = self.session("--language", "python"), self.session("--language", "bash"), \
            self.session("--machine")
        # A one-shot that runs while we look.
        one_shot = subprocess.Popen([str(BIN_DIR / "warden"), "--addr", "unix:%s" % self.wardend.socket, "exec",
                                     "--language", "python", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        def end_one_shot():
            one_shot.kill()
            one_shot.wait()
            one_shot.stdout.close()
            one_shot.stderr.close()
        self.addCleanup(end_one_shot)
        one_shot.stdin.write("import time\nprint('running', flush=True)\ntime.sleep(60)\n")
        one_shot.stdin.close()
        self.assertEqual(one_shot.stdout.readline(), "running\n")

        # Each init is told its session's name by a message it reads soon
        # after the session is made, and the pools refill: what ps shows
        # settles within moments. Expected: the sessions' inits, the
        # one-shot's (from the Python pool) and a ready bash worker's.
        expected = {("warden-sandbox %s\0" % name).encode() for name in (python, bash, machine, "python", "bash")}

        def look():
            tree = descendants(daemon)
            names = {pid: (proc(pid, "comm"), proc(pid, "cmdline")) for pid in tree}
            inits = {a for c, a in names.values() if c == b"warden-sandbox\n"}
            return (tree, names, inits) if expected <= inits else None

        def describe():
            return "\n".join("%d %r %r" % (pid, proc(pid, "comm"), proc(pid, "cmdline"))
                             for pid in sorted(descendants(daemon)))
        tree, names, inits = wait_until("every sandbox named", look, describe=describe)
        listing = describe()
        # pidof, as an operator runs it: of this daemon's processes (other
        # tests' daemons may run beside it), the daemon alone.
        pidof = subprocess.run(["pidof", "wardend"], capture_output=True, text=True).stdout.split()
        self.assertIn(str(daemon), pidof)
        self.assertEqual([p for p in pidof if int(p) in tree], [], listing)

        # Every clone of wardend is a sandbox's init, named as one.
        clones = [pid for pid in tree if os.path.realpath("/proc/%d/exe" % pid) == wardend_exe]
        self.assertTrue(clones, listing)
        for pid in clones:
            self.assertEqual(names[pid][0], b"warden-sandbox\n", listing)
            self.assertTrue(names[pid][1].startswith(b"warden-sandbox "), listing)
        # The zygote's in-place kernels read as an exec'd kernel would.
        kernels = [a for c, a in names.values() if c == b"python3\n"]
        self.assertTrue(kernels, listing)
        for cmdline in kernels:
            self.assertEqual(cmdline.split(b"\0")[:3], [b"/usr/bin/python3", b"-u", b"-E"], listing)
        self.assertEqual(self.wardend.stop(), 0, self.wardend.log())


class UsageTest(unittest.TestCase):
    def test_help_for_a_command_that_does_not_exist_is_a_usage_error(self):
        usage = subprocess.run([str(BIN_DIR / "warden"), "help", "no-such-command"], capture_output=True, text=True,
                               timeout=CALL_TIMEOUT_S)
        self.assertEqual(usage.returncode, 2, usage.stderr)
        self.assertIn("warden: unknown command 'no-such-command'", usage.stderr)
        for command in ("exec FILE|-", "session create", "files put", "agent", "mcp", "help [COMMAND]"):
            self.assertIn(command, usage.stderr)


if __name__ == "__main__":
    unittest.main()
