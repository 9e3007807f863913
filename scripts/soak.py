#!/usr/bin/python3
"""Soak and fault injection for wardend (issue 13; `make soak`, `make soak-quick`).

Starts its own warden-keeper + wardend on a private state directory (a small
tmpfs of its own), UNIX socket, loopback HTTP port and cgroup, with limits
that bite quickly, and drives a realistic mix for --seconds: one-shots in
Python, JavaScript and bash; long sessions with files and plots; the agent
against a fake model server; the MCP, E2B and Kernel Gateway fronts; and
abusers (fork bombs, memory hogs, output floods, infinite loops, workspace
fillers, malformed requests) at their limits. Meanwhile it injects faults at
random (a seeded RNG; the seed is printed): sandboxes and kernels killed,
the Python zygote killed, the state disk filled, cgroup creation failing
(WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT, a test-only hook), and, until the
warm-up mark, wardend killed (-9) or restarted (SIGTERM) and the keeper
killed and started again. After each restart the sessions made before it
must answer with the value they held.

It checks and prints as a table: requests by kind and outcome (every one
answered or refused with a status; one with no answer by its client-side
deadline is LOST), no unexplained death of wardend, sessions surviving
restarts, no process, fd, mount, cgroup or file left at the end, and
wardend's RSS at the warm-up mark (10 minutes, or 1/6 of a shorter run) and
at the end. Writes a JSON result file. Exits 1 on any lost request, wrong
answer, leak, lost session or unexplained daemon death.

It only ever kills processes it started or that live in its own cgroup.
Traffic goes to loopback only; every loop is bounded in time.

usage: soak.py [--seconds N] [--seed N] [--bin-dir DIR] [--json FILE]
"""
import argparse
import asyncio
import faulthandler
import collections
import http.client
import importlib.util
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from http.server import ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "freezer")
STATE_TMPFS_MB = 48
CGROUP_FAULT_PERCENT = 3
# An idle wardend's fds vary with how many pool workers it holds (a pool
# between size and max_size cools back slowly): each sandbox holds about ten
# (its control socket, pipes, pidfd, eventfd, seccomp notification fd), so
# the end may exceed the start by FD_PER_SANDBOX per sandbox more, counted by
# their seccomp notification fds, plus FD_SLACK. The keeper's fds vary only
# with the sessions it holds (none when idle).
FD_PER_SANDBOX = 12
FD_SLACK = 4
KEEPER_FD_SLACK = 0
ABUSERS = ["forkbomb-py", "forkbomb-sh", "memory", "flood", "loop", "cpu", "disk", "malformed", "malformed-http"]

# Client-side deadlines (seconds). Each is above anything the server may
# legitimately take (queue wait + the longest cell + a restart), so a
# request that reaches it is a hang: LOST.
DEADLINE = {"exec": 90, "agent": 120, "http": 90, "admin": 30}


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


# ---------------------------------------------------------------------------
# Processes, cgroups, mounts.

def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def children_of(pid):
    out = []
    for task in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else []:
        out += [int(c) for c in read("/proc/%d/task/%s/children" % (pid, task)).split()]
    return out


def descendants(pid):
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children_of(p):
            seen.append(c)
            todo.append(c)
    return seen


def comm(pid):
    return read("/proc/%d/comm" % pid).strip()


def rss_kib(pid):
    for line in read("/proc/%d/status" % pid).splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def fd_count(pid):
    """Open fds, less the namespace fds wardend's recycle pool keeps (at most
    64 sets, bounded by design: sandbox/recycle_pool.h), counted apart."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return None
    n = 0
    for fd in fds:
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if not target.startswith(("net:[", "ipc:[", "uts:[")):
            n += 1
    return n


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return read("/proc/%d/stat" % pid).split(") ")[-1][:1] not in ("Z", "")


def fd_allowance(start, end):
    """The most idle fds `end` may hold given `start`'s (see FD_PER_SANDBOX)."""
    notify = "anon::seccomp notify"
    extra = max(0, end["wardend_fd_kinds"].get(notify, 0) - start["wardend_fd_kinds"].get(notify, 0))
    return start["wardend_fds"] + FD_PER_SANDBOX * extra + FD_SLACK


def fd_kinds(pid):
    """What a process's fds are, by kind (socket, pipe, pidfd, a path...), for the report."""
    kinds = collections.Counter()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            kinds[t.split(":[")[0] if ":[" in t else ("anon:" + t[10:] if t.startswith("anon_inode") else t)] += 1
    except OSError:
        pass
    return dict(kinds)


class PrivateCgroup:
    """One cgroup of the soak's own in each v1 controller (under the soak's
    current cgroup): the keeper, wardend and every sandbox live inside it,
    so "ours" is exact and a leak is anything left in it."""

    def __init__(self):
        self.dirs = {}
        name = "warden-soak-%d" % os.getpid()
        for ctrl in V1_CONTROLLERS:
            base = self._current(ctrl)
            if base is None:
                continue
            d = os.path.join(base, name)
            os.mkdir(d)
            if ctrl == "memory":
                pass
            self.dirs[ctrl] = d
        if set(self.dirs) != set(V1_CONTROLLERS):
            raise RuntimeError("the soak needs cgroup v1 with %s (found %s)" % (V1_CONTROLLERS, sorted(self.dirs)))
        # cpuset is not among wardend's controllers; nothing to copy.

    @staticmethod
    def _current(ctrl):
        for line in read("/proc/self/cgroup").splitlines():
            _, ctrls, path = line.split(":", 2)
            if ctrl in ctrls.split(","):
                for mount in ("/sys/fs/cgroup/%s" % ctrl, "/sys/fs/cgroup/%s" % ctrls):
                    if os.path.isdir(mount):
                        return mount + path
        return None

    def enter(self):
        """preexec_fn: moves the child into the cgroup."""
        for d in self.dirs.values():
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write("0")

    def procs(self):
        pids = set()
        for d in self.dirs.values():
            for root, _, _ in os.walk(d):
                pids.update(int(p) for p in read(os.path.join(root, "cgroup.procs")).split())
        return pids

    def subgroups(self):
        out = []
        for ctrl, d in self.dirs.items():
            for root, dirs, _ in os.walk(d):
                out += [os.path.join(root, x) for x in dirs]
        return sorted(out)

    def remove(self):
        left = []
        for d in self.dirs.values():
            for root, dirs, _ in sorted(os.walk(d, topdown=False), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(root)
                except OSError as e:
                    left.append("%s (%s)" % (root, e.strerror))
        return left


def mounts_mentioning(text):
    return [l for l in read("/proc/self/mountinfo").splitlines() if text in l]


# ---------------------------------------------------------------------------
# The fake model: tests/fake_openai_server.py, its script cycling forever.

class Cycle:
    def __init__(self, steps):
        self.steps = steps

    def __len__(self):
        return 1 << 62

    def __getitem__(self, i):
        return self.steps[i % len(self.steps)]


def start_fake_model():
    spec = importlib.util.spec_from_file_location("fake_openai_server", ROOT / "tests" / "fake_openai_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.Handler.script = Cycle([
        {"content": "", "tool_calls": [{"name": "execute_code",
                                        "arguments": json.dumps({"code": "print(sum(range(10)))"})}]},
        {"content": "The sum is 45."},
    ])
    server = ThreadingHTTPServer(("127.0.0.1", 0), module.Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return module, server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------
# Outcomes.

class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.defaultdict(collections.Counter)
        self.lost = []
        self.wrong = []
        self.events = []

    def add(self, kind, outcome, detail=""):
        with self.lock:
            self.counts[kind][outcome] += 1
            if outcome == "LOST":
                self.lost.append("%s %s %s" % (time.strftime("%H:%M:%S"), kind, detail))
            elif outcome == "WRONG":
                self.wrong.append("%s %s %s" % (time.strftime("%H:%M:%S"), kind, detail[:300]))

    def event(self, text):
        with self.lock:
            self.events.append("%s %s" % (time.strftime("%H:%M:%S"), text))
        log(text)


# ---------------------------------------------------------------------------
# The soak.

class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.tally = Tally()
        self.stop = threading.Event()
        self.start_time = time.monotonic()
        self.failures = []
        self.rss = []            # (t, pid, kib)
        self.rss_marks = {}
        self.killed_daemons = set()   # wardend pids the soak itself killed
        self.daemons_seen = []        # every wardend pid, in order
        self.unexplained = []
        self.daemon_lock = threading.RLock()  # held across a lifecycle fault
        self.restarting = threading.Event()
        self.survivors = {}   # session id -> value it holds
        self.surv_lock = threading.Lock()
        # Survivors a loop is stepping now: one step at a time per survivor,
        # or two loops would send the same step and the second would find
        # the first's value (the session runs them in turn, as it should).
        self.surv_busy = set()
        self.survival = collections.Counter()
        self.keeper = None
        self.keeper_generation = 0
        self.kill_times = []  # monotonic times of the soak's kills

    # -- set-up ------------------------------------------------------------

    def setup(self):
        a = self.args
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="warden-soak."))
        self.state = self.dir / "state"
        self.state.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700" % STATE_TMPFS_MB,
                        "warden-soak-state", str(self.state)], check=True)
        self.cgroup = PrivateCgroup()
        self.module, self.model = start_fake_model()
        self.port = free_port()
        self.socket = self.state / "w.sock"
        config = {
            "limits": {"defaults": {"wall_ms": 4000, "cpu_ms": 4000, "memory_mb": 128, "output_bytes": 65536},
                       "max": {"wall_ms": 20000, "cpu_ms": 20000, "memory_mb": 256, "output_bytes": 1 << 20},
                       "pids": 32, "tmpfs_mb": 16, "max_file_bytes": 4 << 20},
            "sessions": {"max_total": 40, "max_per_tenant": 40, "default_ttl_seconds": 7200,
                         "max_ttl_seconds": 7200, "default_idle_timeout_seconds": 7200},
            "snapshots": {"dir": str(self.state / "snapshots"), "max_bytes_per_tenant": 16 << 20},
            "pools": [{"language": "python", "size": 1, "max_size": 2, "warm": ["numpy"]},
                      {"language": "javascript", "size": 1}, {"language": "bash", "size": 1}],
            "queue": {"max_depth": 12, "max_wait_ms": 8000, "max_running": 6},
            "max_concurrent_per_tenant": 6,
            "shutdown_grace_ms": 2000,
            "executor": {"host_id_base": 9_000_000 + (os.getpid() % 1024) * 1024, "host_id_count": 1024},
        }
        self.host_ids = range(config["executor"]["host_id_base"],
                              config["executor"]["host_id_base"] + config["executor"]["host_id_count"])
        (self.dir / "wardend.json").write_text(json.dumps(config, indent=1))
        self.wardend_log = self.dir / "wardend.log"
        sys.path.insert(0, str(a.stubs_dir))
        global grpc, ex_pb, ex_grpc, ag_pb, ag_grpc
        import grpc
        from warden.v1 import executor_pb2 as ex_pb, executor_pb2_grpc as ex_grpc
        from warden.v1 import agent_pb2 as ag_pb, agent_pb2_grpc as ag_grpc
        self.start_keeper()
        self.baseline_idle = self.idle_figures()
        log("baseline (idle, pools full): wardend fds %s, keeper fds %s, wardend RSS %s KiB" % (
            self.baseline_idle["wardend_fds"], self.baseline_idle["keeper_fds"], self.baseline_idle["rss_kib"]))

    def start_keeper(self):
        a = self.args
        env = dict(os.environ)
        env["WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT"] = str(a.cgroup_fault_percent)
        self.keeper_generation += 1
        logf = open(self.wardend_log, "ab")
        self.keeper = subprocess.Popen(
            [str(a.bin_dir / "warden-keeper"), "--socket", str(self.state / "keeper.sock"), "--",
             str(a.bin_dir / "wardend"), "--config", str(self.dir / "wardend.json"),
             "--listen", "unix:%s" % self.socket, "--state-dir", str(self.state),
             "--http-listen", "127.0.0.1:%d" % self.port, "--allow-insecure-loopback",
             "--llm-base-url", "http://127.0.0.1:%d/v1" % self.model.server_address[1],
             "--llm-model", "fake-model"],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
            preexec_fn=self.cgroup.enter)
        logf.close()
        self.wait_serving(time.monotonic() + 120)

    def daemon_pid(self):
        for line in read(str(self.state / "wardend.state")).splitlines():
            if line.startswith("daemon "):
                pid = int(line.split()[1])
                if alive(pid):
                    return pid
        return None

    def zygote_pid(self):
        for line in read(str(self.state / "wardend.state")).splitlines():
            parts = line.split(" ", 3)
            if parts[0] == "process" and "zygote" in line:
                return int(parts[1])
        return None

    def wait_serving(self, deadline, old=None):
        """Until a wardend other than `old` answers /readyz and gRPC."""
        while time.monotonic() < deadline:
            pid = self.daemon_pid()
            if pid and pid != old and self.ready():
                self.note_daemon(pid)
                self.channel = grpc.insecure_channel("unix:%s" % self.socket,
                                                     options=[("grpc.use_local_subchannel_pool", 1)])
                self.executor = ex_grpc.ExecutorStub(self.channel)
                self.agent = ag_grpc.AgentStub(self.channel)
                return pid
            if self.keeper and self.keeper.poll() is not None:
                raise RuntimeError("warden-keeper exited with %s; see %s" % (self.keeper.returncode, self.wardend_log))
            time.sleep(0.1)  # polling a process we do not control: no event to wait on
        raise RuntimeError("wardend did not serve in time; see %s" % self.wardend_log)

    def ready(self, path="/readyz"):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            c.request("GET", path)
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False

    def note_daemon(self, pid):
        with self.daemon_lock:
            if not self.daemons_seen or self.daemons_seen[-1] != pid:
                if self.daemons_seen and self.daemons_seen[-1] not in self.killed_daemons:
                    self.unexplained.append("wardend %d was replaced by %d without the soak killing it" % (
                        self.daemons_seen[-1], pid))
                    self.tally.event("UNEXPLAINED: wardend %d died on its own; now %d" % (self.daemons_seen[-1], pid))
                self.daemons_seen.append(pid)

    def idle_figures(self, baseline=None):
        """The idle wardend's and keeper's fds and RSS once the pools are
        full and nothing runs: at the start, until they stop changing; at
        the end, until they are back within the slack of `baseline` (the
        pools cool back to their size) or 120 s have passed."""
        deadline = time.monotonic() + (120 if baseline else 60)
        prev = None
        while True:
            wardend = self.daemon_pid()
            cur = {"wardend_fds": fd_count(wardend) if wardend else None,
                   "keeper_fds": fd_count(self.keeper.pid), "rss_kib": rss_kib(wardend) if wardend else None,
                   "pid": wardend, "wardend_fd_kinds": fd_kinds(wardend) if wardend else {}}
            if baseline:
                settled = (cur["wardend_fds"] is not None and
                           cur["wardend_fds"] <= fd_allowance(baseline, cur) and
                           cur["keeper_fds"] <= baseline["keeper_fds"] + KEEPER_FD_SLACK)
            else:
                settled = prev is not None and (cur["wardend_fds"], cur["keeper_fds"]) == prev
            if settled or time.monotonic() > deadline:
                return cur
            prev = (cur["wardend_fds"], cur["keeper_fds"])
            time.sleep(3)  # pools refill and cool in the background: nothing to wait on

    # -- one request -------------------------------------------------------

    def grpc_call(self, kind, fn, check=None):
        """Runs fn(timeout) and records its outcome; returns the response or None."""
        t0 = time.monotonic()
        limit = DEADLINE["agent" if kind.startswith("agent") else "exec"]
        try:
            resp = fn(limit)
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - t0 >= limit * 0.98:
                self.tally.add(kind, "LOST", "%.0fs: %s" % (time.monotonic() - t0, e.details()))
            else:
                self.tally.add(kind, "status " + code.name)
            return None
        except Exception as e:  # a bug of the soak itself, counted apart
            self.tally.add(kind, "client-error " + type(e).__name__, str(e))
            return None
        outcome = "OK"
        if hasattr(resp, "outcome"):
            outcome = ex_pb.Outcome.Name(resp.outcome).replace("OUTCOME_", "")
        if check is not None:
            why = check(resp)
            if why and self.killed_during(t0) and outcome != "OK":
                # The soak itself killed a sandbox meanwhile: maybe this one.
                self.tally.add(kind, "%s (a kill fault overlapped)" % outcome)
                return resp
            if why:
                self.tally.add(kind, "WRONG", why)
                return resp
        self.tally.add(kind, outcome)
        return resp

    def execute(self, kind, check=None, **req):
        r = ex_pb.ExecuteRequest(**req)
        return self.grpc_call(kind, lambda t: self.executor.Execute(r, timeout=t), check)

    def http(self, kind, method, path, body=None, headers=None, expect_json=True):
        """One HTTP request; returns (status, body) or None. Connection errors are refusals."""
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=DEADLINE["http"])
            hdrs = {"Content-Type": "application/json"}
            hdrs.update(headers or {})
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, path, body=data, headers=hdrs)
            r = c.getresponse()
            payload = r.read()
            c.close()
        except socket.timeout:
            self.tally.add(kind, "LOST", "%s %s after %.0fs" % (method, path, time.monotonic() - t0))
            return None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            self.tally.add(kind, "refused " + type(e).__name__)
            return None
        self.tally.add(kind, "HTTP %d" % r.status)
        return r.status, payload

    # -- the mix -----------------------------------------------------------

    def oneshot(self):
        lang = self.rng.choice(["python", "javascript", "bash"])
        n = self.rng.randint(2, 50)
        if lang == "python":
            code, want = "import numpy as np\nprint(int(np.arange(%d).sum()))" % n, "%d\n" % (n * (n - 1) // 2)
            language = ex_pb.LANGUAGE_PYTHON
        elif lang == "javascript":
            code, want = "console.log(Array.from({length: %d}, (_, i) => i).reduce((a, b) => a + b, 0))" % n, \
                "%d\n" % (n * (n - 1) // 2)
            language = ex_pb.LANGUAGE_JAVASCRIPT
        else:
            code, want = "echo $(( %d * (%d - 1) / 2 ))" % (n, n), "%d\n" % (n * (n - 1) // 2)
            language = ex_pb.LANGUAGE_BASH

        def check(resp):
            if resp.outcome == ex_pb.OUTCOME_OK and resp.stdout.decode(errors="replace") != want:
                return "%s printed %r, not %r" % (lang, resp.stdout[:100], want)
            return None
        self.execute("oneshot-" + lang, check, code=code, language=language)

    def new_session(self, kind, language=None, labels=None):
        req = ex_pb.CreateSessionRequest(language=language or ex_pb.LANGUAGE_PYTHON,
                                         labels=dict({"soak": "1"}, **(labels or {})))
        s = self.grpc_call(kind, lambda t: self.executor.CreateSession(req, timeout=t))
        return s.id if s else None

    def close_session(self, kind, sid):
        self.grpc_call(kind, lambda t: self.executor.CloseSession(ex_pb.CloseSessionRequest(session_id=sid), timeout=t))

    def long_session(self):
        """A session through files, a plot and state; ends closed."""
        sid = self.new_session("session-create")
        if not sid:
            return
        v = self.rng.randint(1, 10 ** 9)
        self.execute("session-exec", code="v = %d" % v, session_id=sid)
        data = os.urandom(self.rng.randint(1, 200_000))

        def upload(t):
            def parts():
                yield ex_pb.UploadFileRequest(header=ex_pb.UploadFileHeader(session_id=sid, path="d/in.bin",
                                                                             size=len(data)))
                for i in range(0, len(data), 65536):
                    yield ex_pb.UploadFileRequest(chunk=data[i:i + 65536])
            return self.executor.UploadFile(parts(), timeout=t)
        self.grpc_call("session-upload", upload)
        self.execute("session-exec", lambda r: None if r.outcome != ex_pb.OUTCOME_OK or
                     r.stdout.decode() == "%d %d\n" % (len(data), v) else "read back %r" % r.stdout[:80],
                     code="print(len(open('d/in.bin','rb').read()), v)", session_id=sid)
        self.execute("session-plot", lambda r: None if r.outcome != ex_pb.OUTCOME_OK or
                     any("image/png" in x.data for x in r.results) else "no PNG in the plot's results",
                     code="import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\n"
                          "plt.plot([1, 3, 2]); plt.show()", session_id=sid,
                     limits=ex_pb.Limits(wall_ms=20000, cpu_ms=20000))
        self.grpc_call("session-files", lambda t: self.executor.ListFiles(
            ex_pb.ListFilesRequest(session_id=sid), timeout=t))

        def download(t):
            return b"".join(c.data for c in self.executor.DownloadFile(
                ex_pb.DownloadFileRequest(session_id=sid, path="d/in.bin"), timeout=t))
        self.grpc_call("session-download", download,
                       lambda got: None if got == data else "downloaded %d bytes, uploaded %d" % (len(got), len(data)))
        self.close_session("session-close", sid)

    def agent_run(self):
        start = ag_pb.AgentRequest(start=ag_pb.RunAgentRequest(
            task="Sum the numbers below 10", budget=ag_pb.AgentBudget(max_iterations=3)))

        def run(t):
            final = None
            for ev in self.agent.Run(iter([start]), timeout=t):
                if ev.WhichOneof("event") == "final":
                    final = ev.final
            return final
        self.grpc_call("agent", run, lambda f: None if f is not None else "the stream ended without a final event")
        with self.module.LOCK:
            self.module.STATE["requests"].clear()  # the fake records every request

    def mcp(self):
        n = self.rng.randint(1, 99)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "execute_code", "arguments": {"code": "print(%d * 2)" % n}}}
        r = self.http("mcp", "POST", "/mcp", body, {"Accept": "application/json, text/event-stream"})
        if r and r[0] == 200:
            try:
                answer = json.loads(r[1])
                if "error" in answer:  # a JSON-RPC error is an answer too
                    self.tally.add("mcp-check", "json-rpc error %s" % answer["error"].get("code"))
                    return
                res = answer["result"]
                sc = res.get("structuredContent", {})
                if sc.get("outcome") == "ok" and sc.get("stdout") != "%d\n" % (2 * n):
                    self.tally.add("mcp-check", "WRONG", "stdout %r" % sc.get("stdout"))
            except (ValueError, KeyError) as e:
                self.tally.add("mcp-check", "WRONG", "unparsable: %s %r" % (e, r[1][:200]))

    def e2b(self):
        r = self.http("e2b-create", "POST", "/sandboxes", {"templateID": "code-interpreter", "timeout": 300},
                      {"X-API-KEY": "e2b_" + "0" * 32})
        if not r or r[0] not in (200, 201):
            return
        sb = json.loads(r[1])
        hdr = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb.get("envdAccessToken", "")}
        n = self.rng.randint(1, 99)
        r = self.http("e2b-execute", "POST", "/execute", {"code": "x = %d\nx + 1" % n}, hdr)
        if r and r[0] == 200 and ('"%d"' % (n + 1)) not in r[1].decode(errors="replace"):
            self.tally.add("e2b-check", "WRONG", "execute answered %r" % r[1][:300])
        self.http("e2b-kill", "DELETE", "/sandboxes/%s" % sb["sandboxID"], None, {"X-API-KEY": "e2b_" + "0" * 32})

    def kernel_gateway(self):
        r = self.http("kg-create", "POST", "/api/kernels", {"name": "python3"})
        if not r or r[0] != 201:
            return
        kid = json.loads(r[1])["id"]
        n = self.rng.randint(1, 99)
        t0 = time.monotonic()
        try:
            reply = asyncio.run(asyncio.wait_for(self._kg_execute(kid, "print(%d + 1)" % n), DEADLINE["http"]))
            out = "".join(reply[1])
            if reply[0] == "ok" and out != "%d\n" % (n + 1):
                self.tally.add("kg-execute", "WRONG", "stdout %r" % out)
            else:
                self.tally.add("kg-execute", "reply " + reply[0])
        except asyncio.TimeoutError:
            self.tally.add("kg-execute", "LOST", "no execute_reply after %.0fs" % (time.monotonic() - t0))
        except Exception as e:  # the socket closed or was refused: a refusal
            self.tally.add("kg-execute", "refused " + type(e).__name__)
        self.http("kg-delete", "DELETE", "/api/kernels/%s" % kid)

    async def _kg_execute(self, kid, code):
        import tornado.websocket
        ws = await tornado.websocket.websocket_connect("ws://127.0.0.1:%d/api/kernels/%s/channels" % (self.port, kid))
        msg_id = "soak-%d" % self.rng.randint(0, 1 << 30)
        ws.write_message(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": "soak",
                                                "username": "soak", "version": "5.3"},
                                     "parent_header": {}, "metadata": {}, "channel": "shell",
                                     "content": {"code": code, "silent": False}}))
        out = []
        try:
            while True:
                m = await ws.read_message()
                if m is None:
                    return ("closed", out)
                m = json.loads(m)
                if m.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if m.get("msg_type") == "stream":
                    out.append(m["content"]["text"])
                if m.get("msg_type") == "execute_reply":
                    return (m["content"]["status"], out)
        finally:
            ws.close()

    def abuser(self):
        """Code at its limits; each must come back with the limit named."""
        a = self.rng.choice([a for a in ABUSERS if not self.args.abusers or a in self.args.abusers] or ABUSERS)
        lim = ex_pb.Limits(wall_ms=3000, cpu_ms=3000)
        if a == "forkbomb-py":
            self.execute("abuse-forkbomb", code="import os\nwhile True:\n    try:\n        os.fork()\n"
                         "    except OSError:\n        pass", limits=lim)
        elif a == "forkbomb-sh":
            self.execute("abuse-forkbomb", code=":(){ :|:& };:", language=ex_pb.LANGUAGE_BASH, limits=lim)
        elif a == "memory":
            self.execute("abuse-memory", lambda r: None if r.outcome == ex_pb.OUTCOME_MEMORY_LIMIT else
                         "a 1 GiB allocation ended %s" % ex_pb.Outcome.Name(r.outcome),
                         code="x = bytearray(1 << 30)\nx[::4096] = b'1' * len(x[::4096])", limits=lim)
        elif a == "flood":
            self.execute("abuse-flood", code="import sys\nwhile True:\n    sys.stdout.write('y' * 65536)",
                         limits=lim)
        elif a == "loop":
            self.execute("abuse-loop", lambda r: None if r.outcome in (ex_pb.OUTCOME_WALL_TIMEOUT,
                                                                       ex_pb.OUTCOME_CPU_TIMEOUT) else
                         "an endless loop ended %s" % ex_pb.Outcome.Name(r.outcome),
                         **self.rng.choice([dict(code="while True: pass", language=ex_pb.LANGUAGE_PYTHON),
                                            dict(code="while (true) {}", language=ex_pb.LANGUAGE_JAVASCRIPT),
                                            dict(code="while :; do :; done", language=ex_pb.LANGUAGE_BASH)]),
                         limits=ex_pb.Limits(wall_ms=1500, cpu_ms=1500))
        elif a == "cpu":
            self.execute("abuse-loop", code="import threading\ndef f():\n    while True: pass\n"
                         "[threading.Thread(target=f).start() for _ in range(8)]\nf()", limits=lim)
        elif a == "disk":
            # Fill the workspace (its own tmpfs) until ENOSPC, then prove the sandbox still answers.
            self.execute("abuse-disk", lambda r: None if r.outcome != ex_pb.OUTCOME_OK or b"full" in r.stdout
                         else "the workspace never filled: %r" % r.stdout[:100],
                         code="import errno\ntry:\n    with open('big', 'wb') as f:\n        while True:\n"
                              "            f.write(b'0' * (1 << 20))\nexcept OSError as e:\n"
                              "    print('full' if e.errno == errno.ENOSPC else e)\n", limits=lim)
        elif a == "malformed":
            bad = self.rng.choice([
                dict(code="print(1)", session_id="s-nosuchsession00000000000"),
                dict(code="x" * (2 << 20)),
                dict(code="print(1)", language=77),
                dict(code="print(1)", limits=ex_pb.Limits(wall_ms=10 ** 9)),
                dict(code="print(1)", files=[ex_pb.File(path="../../etc/passwd", content=b"x")]),
            ])
            self.execute("abuse-malformed", **bad)
        else:
            path, body, hdr = self.rng.choice([
                ("/mcp", b"{not json", {}),
                ("/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                     "params": {"name": "nope"}}).encode(), {}),
                ("/execute", b"\xff\xfe garbage", {"E2b-Sandbox-Id": "s-0"}),
                ("/api/kernels", b"[1,2", {}),
                ("/sandboxes", b'{"templateID": 5}', {"X-API-KEY": "e2b_" + "0" * 32}),
                ("/mcp", b"x" * (5 << 20), {}),
            ])
            self.http("abuse-malformed-http", "POST", path, body, hdr)

    # A survivor's kernel renames itself, so that the faults that kill random
    # sandboxes spare it: its loss would be the soak's doing, not a broken promise.
    MARK = "soak-survivor"
    MARK_CODE = ("import ctypes\nctypes.CDLL(None).prctl(15, b'%s', 0, 0, 0)\n"
                 "print(open('/proc/self/comm').read().strip())" % MARK)

    def survivor_work(self):
        """Keeps a few sessions alive across the run, each holding a value."""
        with self.surv_lock:
            ids = list(self.survivors)
        if len(ids) < 3:
            sid = self.new_session("survivor-create", labels={"role": "survivor"})
            if not sid:
                return
            mark = self.execute("survivor-mark", lambda r: None if r.outcome != ex_pb.OUTCOME_OK or
                                r.stdout.decode().strip() == self.MARK else "comm %r" % r.stdout[:40],
                                code=self.MARK_CODE, session_id=sid)
            v = self.rng.randint(1, 10 ** 9)
            r = self.execute("survivor-set", code="x = %d" % v, session_id=sid)
            if mark and mark.outcome == ex_pb.OUTCOME_OK and r and r.outcome == ex_pb.OUTCOME_OK:
                with self.surv_lock:
                    self.survivors[sid] = v
            else:
                self.close_session("survivor-close", sid)
            return
        with self.surv_lock:
            free = [i for i in ids if i not in self.surv_busy]
            if not free:
                return
            sid = self.rng.choice(free)
            self.surv_busy.add(sid)
        try:
            self.step_survivor(sid)
        finally:
            with self.surv_lock:
                self.surv_busy.discard(sid)

    def step_survivor(self, sid):
        with self.surv_lock:
            v = self.survivors.get(sid)
        if v is None:
            return
        if v == "unknown":
            # The last step got no answer (a restart): it may or may not have run.
            r = self.execute("survivor-resync", code="print(x)", session_id=sid)
            if r and r.outcome == ex_pb.OUTCOME_OK:
                with self.surv_lock:
                    if self.survivors.get(sid) == "unknown":
                        self.survivors[sid] = int(r.stdout.decode())
            return
        nv = v + 1
        r = self.execute("survivor-step", code="assert x == %d, x\nx = %d\nprint(x)" % (v, nv), session_id=sid)
        with self.surv_lock:
            if self.survivors.get(sid) != v:
                return
            if r and r.outcome == ex_pb.OUTCOME_OK:
                self.survivors[sid] = nv
            elif r is None:
                self.survivors[sid] = "unknown"
        if r and r.outcome == ex_pb.OUTCOME_ERROR and "AssertionError" in r.error.name:
            self.tally.add("survivor-state", "WRONG", "%s held %s, not %d" % (sid, r.error.value, v))

    def worker(self, index):
        kinds = [(self.oneshot, 30), (self.long_session, 10), (self.agent_run, 6), (self.mcp, 8),
                 (self.e2b, 5), (self.kernel_gateway, 5), (self.abuser, 14), (self.survivor_work, 8)]
        if self.args.kinds:
            kinds = [k for k in kinds if k[0].__name__ in self.args.kinds] or kinds
        fns, weights = zip(*kinds)
        rng = random.Random(self.args.seed * 1000 + index)
        while not self.stop.is_set():
            if self.restarting.is_set():
                self.stop.wait(0.2)  # a lifecycle fault holds new work for its check
                continue
            fn = rng.choices(fns, weights)[0]
            try:
                fn()
            except Exception:
                self.tally.add("soak-bug", "exception", traceback.format_exc()[-400:])
                log("soak bug:", traceback.format_exc())

    # -- faults ------------------------------------------------------------

    def sandbox_procs(self):
        """(init pid, [descendants]) for each sandbox: wardend's children but the zygote."""
        wardend = self.daemon_pid()
        if not wardend:
            return []
        ours = self.cgroup.procs()
        zygote = self.zygote_pid()
        out = []
        for c in children_of(wardend):
            if c == zygote or c not in ours:
                continue
            procs = descendants(c)
            if any(comm(p) == self.MARK for p in [c] + procs):
                continue  # a survivor: spared (see MARK)
            out.append((c, procs))
        return out

    def fault(self, lifecycle_allowed):
        choices = [("kill-sandbox", 3), ("kill-kernel", 3), ("kill-zygote", 1), ("fill-state-disk", 2)]
        if lifecycle_allowed:
            choices += [("kill-9-wardend", 3), ("sigterm-wardend", 2), ("kill-keeper", 1)]
        if self.args.faults:
            choices = [c for c in choices if c[0] in self.args.faults]
            if not choices:
                return  # --faults none
        names, weights = zip(*choices)
        name = self.rng.choices(names, weights)[0]
        if name in ("kill-sandbox", "kill-kernel"):
            sandboxes = self.sandbox_procs()
            targets = [s[0] for s in sandboxes] if name == "kill-sandbox" else [p for s in sandboxes for p in s[1]]
            if not targets:
                return self.tally.event("fault %s: nothing to kill" % name)
            pid = self.rng.choice(sorted(targets))
            self.kill(pid, signal.SIGKILL)
            self.tally.event("fault %s: SIGKILL %d (%s)" % (name, pid, comm(pid) or "gone"))
            self.check_health(name)
        elif name == "kill-zygote":
            z = self.zygote_pid()
            if z and z in self.cgroup.procs():
                self.kill(z, signal.SIGKILL)
                self.tally.event("fault kill-zygote: SIGKILL %d" % z)
            self.check_health(name)
        elif name == "fill-state-disk":
            fill = self.state / "soak-fill"
            try:
                with open(fill, "wb", buffering=0) as f:  # unbuffered: close has nothing left to fail on
                    try:
                        while True:
                            f.write(b"\0" * (1 << 20))
                    except OSError:
                        pass
                hold = self.rng.uniform(5, 20)
                self.tally.event("fault fill-state-disk: %s full for %.0f s" % (self.state, hold))
                self.stop.wait(hold)
            finally:
                fill.unlink(missing_ok=True)
            self.check_health(name)
        else:
            self.lifecycle(name)

    def killed_during(self, t0):
        """Whether the soak killed a sandbox, kernel or the zygote since t0 (monotonic)."""
        return any(t >= t0 for t in self.kill_times[-50:])

    def kill(self, pid, sig):
        if pid not in self.cgroup.procs() and pid != (self.keeper.pid if self.keeper else None):
            return  # never anything outside our cgroup
        self.kill_times.append(time.monotonic())
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def check_health(self, fault):
        """After a fault: wardend still alive and serving (/healthz; /readyz
        may say not ready while a pool refills, which is no failure)."""
        deadline = time.monotonic() + 60
        healthy = self.ready("/healthz")
        while time.monotonic() < deadline and not healthy:
            time.sleep(0.5)  # waiting on another process's state
            healthy = self.ready("/healthz")
        if not healthy:
            self.failures.append("wardend not ready 60 s after the fault %s" % fault)
            self.tally.event("FAIL: wardend not ready after %s" % fault)
        pid = self.daemon_pid()
        if pid:
            self.note_daemon(pid)

    def lifecycle(self, name):
        self.restarting.set()
        try:
            with self.surv_lock:
                before = dict(self.survivors)
            old = self.daemon_pid()
            if name == "kill-keeper":
                self.kill_keeper()
                with self.surv_lock:
                    self.survivors.clear()  # documented: a keeper crash loses the sessions
                self.survival["lost by design (keeper killed)"] += len(before)
                return
            with self.daemon_lock:
                self.killed_daemons.add(old)
                os.kill(old, signal.SIGKILL if name == "kill-9-wardend" else signal.SIGTERM)
            t0 = time.monotonic()
            new = self.wait_serving(time.monotonic() + 120, old=old)
            self.tally.event("fault %s: wardend %d -> %d, serving after %.1f s; %d sessions to check" % (
                name, old, new, time.monotonic() - t0, len(before)))
            self.check_survivors(before, name)
        finally:
            self.restarting.clear()

    def check_survivors(self, before, fault):
        for sid, v in before.items():
            deadline = time.monotonic() + 90
            while True:
                try:
                    # wait_for_ready: the new daemon may still be adopting
                    r = self.executor.Execute(ex_pb.ExecuteRequest(code="print(x)", session_id=sid),
                                              timeout=max(1, deadline - time.monotonic()), wait_for_ready=True)
                    with self.surv_lock:
                        cur = self.survivors.get(sid, v)
                    got = r.stdout.decode().strip()
                    if r.outcome == ex_pb.OUTCOME_OK and (got in (str(v), str(cur)) or
                                                          ("unknown" in (v, cur) and got.isdigit())):
                        self.survival["answered with its value"] += 1
                        self.tally.add("survivor-after-restart", "OK")
                    else:
                        self.survival["answered wrongly"] += 1
                        self.tally.add("survivor-after-restart", "WRONG", "%s after %s: %s %r (want %s)" % (
                            sid, fault, ex_pb.Outcome.Name(r.outcome), r.stdout[:80] or r.message, v))
                        with self.surv_lock:
                            self.survivors.pop(sid, None)
                    break
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline:
                        time.sleep(0.5)  # the daemon is between lives
                        continue
                    self.survival["lost: " + e.code().name] += 1
                    self.tally.add("survivor-after-restart", "WRONG", "%s after %s: %s %s" % (
                        sid, fault, e.code().name, e.details()))
                    with self.surv_lock:
                        self.survivors.pop(sid, None)
                    break

    def kill_keeper(self):
        """kill -9 the keeper (a crash of the unit's main process), then what
        systemd would do: the rest of the unit is stopped, a new keeper started."""
        old = self.daemon_pid()
        with self.daemon_lock:
            self.killed_daemons.add(old)
            self.keeper.send_signal(signal.SIGKILL)
            self.keeper.wait()
        # systemd's KillMode=mixed would SIGKILL what is left of the unit: ours is the cgroup.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and old and alive(old):
            time.sleep(0.2)
        left = self.cgroup.procs()
        for pid in left:
            self.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.cgroup.procs():
            time.sleep(0.2)
        self.tally.event("fault kill-keeper: keeper killed; %d processes of the unit SIGKILLed after it" % len(left))
        self.start_keeper()

    def faulter(self):
        lo, hi = self.args.fault_interval
        while not self.stop.wait(self.rng.uniform(lo, hi)):
            try:
                self.fault(self.elapsed() < self.warmup)
            except Exception:
                self.failures.append("fault injection failed: " + traceback.format_exc()[-300:])
                log("fault injection failed:", traceback.format_exc())

    # -- samples and the run -------------------------------------------------

    def elapsed(self):
        return time.monotonic() - self.start_time

    def sampler(self):
        while not self.stop.wait(5):
            pid = self.daemon_pid()
            if pid:
                self.note_daemon(pid)
                k = rss_kib(pid)
                if k:
                    self.rss.append((round(self.elapsed()), pid, k))
            if self.keeper.poll() is not None and not self.restarting.is_set():
                self.failures.append("warden-keeper exited on its own (%s)" % self.keeper.returncode)
                self.tally.event("FAIL: warden-keeper exited on its own")
                self.stop.set()

    def run(self):
        a = self.args
        self.warmup = a.warmup if a.warmup is not None else min(600, a.seconds / 6)
        self.start_time = time.monotonic()
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(a.workers)]
        threads += [threading.Thread(target=self.faulter, daemon=True), threading.Thread(target=self.sampler, daemon=True)]
        for t in threads:
            t.start()
        marked = False
        while self.elapsed() < a.seconds and not self.stop.is_set():
            if not marked and self.elapsed() >= self.warmup and not self.restarting.is_set():
                pid = self.daemon_pid()
                self.rss_marks["warmup"] = {"t": round(self.elapsed()), "pid": pid, "rss_kib": rss_kib(pid)}
                self.tally.event("warm-up mark: wardend %s RSS %s KiB; daemon restarts stop here" % (
                    pid, self.rss_marks["warmup"]["rss_kib"]))
                marked = True
            self.stop.wait(1)
        self.stop.set()
        for t in threads:
            t.join(timeout=DEADLINE["agent"] + 30)
            if t.is_alive():
                self.failures.append("a soak thread did not finish: a request hung past every deadline")
        pid = self.daemon_pid()
        self.rss_marks["end"] = {"t": round(self.elapsed()), "pid": pid, "rss_kib": rss_kib(pid)}

    # -- the end -----------------------------------------------------------

    def finish(self):
        res = {}
        # Close every session the soak left, then read the idle figures.
        try:
            for s in self.executor.ListSessions(ex_pb.ListSessionsRequest(), timeout=30).sessions:
                try:
                    self.executor.CloseSession(ex_pb.CloseSessionRequest(session_id=s.id), timeout=30)
                except grpc.RpcError:
                    pass
            left = self.executor.ListSessions(ex_pb.ListSessionsRequest(), timeout=30).sessions
            res["sessions_left_open"] = len(left)
        except grpc.RpcError as e:
            self.failures.append("listing sessions at the end failed: %s" % e.code().name)
        res["idle_end"] = self.idle_figures(self.baseline_idle)
        res["idle_start"] = self.baseline_idle
        # Stop for real: SIGTERM to the keeper ends every session and cleans up.
        wardend = self.daemon_pid()
        self.keeper.send_signal(signal.SIGTERM)
        try:
            self.keeper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.failures.append("warden-keeper did not stop within 60 s of SIGTERM")
            self.keeper.kill()
            self.keeper.wait()
        res["keeper_exit"] = self.keeper.returncode
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.cgroup.procs():
            time.sleep(0.2)
        leaks = {}
        leaks["processes"] = sorted("%d %s" % (p, comm(p)) for p in self.cgroup.procs())
        uids = []
        for p in os.listdir("/proc"):
            if p.isdigit():
                for line in read("/proc/%s/status" % p).splitlines():
                    if line.startswith("Uid:") and int(line.split()[2]) in self.host_ids:
                        uids.append("%s %s" % (p, comm(int(p))))
        leaks["processes_with_sandbox_uids"] = uids
        leaks["cgroups"] = self.cgroup.subgroups()
        leaks["mounts"] = [m for m in mounts_mentioning(str(self.dir)) if "warden-soak-state" not in m]
        files = []
        for root, dirs, fs in os.walk(self.state):
            for f in fs:
                p = os.path.join(root, f)
                if f == "wardend.lock" and os.path.getsize(p) == 0:
                    continue
                files.append(p)
        leaks["files"] = sorted(files)
        end, start = res["idle_end"], res["idle_start"]
        if end["wardend_fds"] is not None and start["wardend_fds"] is not None and \
                end["wardend_fds"] > fd_allowance(start, end):
            leaks["wardend_fds"] = ["%d idle at the end, %d at the start (%s then, %s now)" % (
                end["wardend_fds"], start["wardend_fds"], start["wardend_fd_kinds"], end["wardend_fd_kinds"])]
        if end["keeper_fds"] is not None and start["keeper_fds"] is not None and \
                end["keeper_fds"] > start["keeper_fds"] + KEEPER_FD_SLACK:
            leaks["keeper_fds"] = ["%d idle at the end, %d at the start" % (end["keeper_fds"], start["keeper_fds"])]
        res["leaks"] = {k: v for k, v in leaks.items() if v}
        if wardend and self.daemons_seen and self.daemons_seen[-1] != wardend:
            self.note_daemon(wardend)
        return res

    def cleanup(self):
        if self.keeper and self.keeper.poll() is None:
            self.keeper.kill()
            self.keeper.wait()
        left = self.cgroup.remove() if hasattr(self, "cgroup") else []
        subprocess.run(["umount", str(self.state)], check=False)
        self.model.shutdown()
        return left


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS", 3600)))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--bin-dir", type=pathlib.Path, default=ROOT / "build" / "bin")
    p.add_argument("--stubs-dir", type=pathlib.Path, default=None)
    p.add_argument("--workers", type=int, default=4, help="concurrent request loops (2 cores: 4)")
    p.add_argument("--cgroup-fault-percent", type=int, default=CGROUP_FAULT_PERCENT)
    p.add_argument("--json", type=pathlib.Path, default=ROOT / "build" / "soak-result.json")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds until the RSS mark, the end of daemon restarts (default min(600, run/6))")
    p.add_argument("--faults", type=lambda v: set(v.split(",")), default=None,
                   help="only these faults (comma-separated names, for trying one path)")
    p.add_argument("--kinds", type=lambda v: set(v.split(",")), default=None,
                   help="only these request loops (oneshot, long_session, agent_run, mcp, e2b, kernel_gateway, "
                        "abuser, survivor_work), e.g. to find which one grows wardend's memory")
    p.add_argument("--abusers", type=lambda v: set(v.split(",")), default=None,
                   help="only these abusers (%s)" % ", ".join(ABUSERS))
    p.add_argument("--keep-dir", action="store_true", help="keep the soak's directory (logs) at the end")
    args = p.parse_args()
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 prints every thread's stack
    if args.seed is None:
        args.seed = random.SystemRandom().randint(1, 10 ** 6)
    # warden-keeper runs wardend by its absolute path only, and `make soak`
    # passes build/bin.
    args.bin_dir = args.bin_dir.resolve()
    if args.stubs_dir is None:
        args.stubs_dir = args.bin_dir.parent / "proto" / "python"
    # Faults every 20-60 s in an hour, denser in short runs.
    args.fault_interval = (8, 25) if args.seconds <= 900 else (20, 60)
    if os.geteuid() != 0:
        sys.exit("the soak needs root (namespaces, cgroups, a tmpfs of its own)")
    for b in ("wardend", "warden-keeper"):
        if not os.access(args.bin_dir / b, os.X_OK):
            sys.exit("%s is missing: build it (cmake --build build --target wardend warden-keeper)" % (args.bin_dir / b))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    log("soak: %d s, seed %d, %d workers, commit %s, load average %s" % (
        args.seconds, args.seed, args.workers, commit, " ".join(read("/proc/loadavg").split()[:3])))
    soak = Soak(args)
    result = {"seed": args.seed, "seconds": args.seconds, "commit": commit,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "loadavg_start": read("/proc/loadavg").split()[:3]}
    try:
        soak.setup()
        log("wardend %s on %s and 127.0.0.1:%d (state %s)" % (soak.daemon_pid(), soak.socket, soak.port, soak.state))
        soak.run()
        result.update(soak.finish())
    except Exception:
        soak.failures.append("the soak itself failed: " + traceback.format_exc()[-600:])
        log(traceback.format_exc())
    finally:
        left = soak.cleanup() if hasattr(soak, "state") else []
        if left:
            result.setdefault("leaks", {})["cgroups_not_removable"] = left
    result["loadavg_end"] = read("/proc/loadavg").split()[:3]
    result["outcomes"] = {k: dict(v) for k, v in soak.tally.counts.items()}
    result["lost"] = soak.tally.lost
    result["wrong"] = soak.tally.wrong
    result["survival"] = dict(soak.survival)
    result["daemons"] = soak.daemons_seen
    result["killed_by_soak"] = sorted(p for p in soak.killed_daemons if p)
    result["unexplained_deaths"] = soak.unexplained
    result["rss_kib"] = soak.rss_marks
    result["rss_timeline"] = soak.rss
    result["events"] = soak.tally.events
    result["failures"] = soak.failures
    report(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    if args.keep_dir:
        shutil.copy(soak.wardend_log, args.json.with_suffix(".wardend.log"))
    log("result: %s" % args.json)
    bad = (result["lost"] or result["wrong"] or result.get("leaks") or result["unexplained_deaths"] or
           result["failures"])
    if not args.keep_dir and hasattr(soak, "dir"):
        shutil.copy(soak.wardend_log, args.json.with_suffix(".wardend.log"))
        shutil.rmtree(soak.dir, ignore_errors=True)
    sys.exit(1 if bad else 0)


def report(r):
    print()
    print("Requests by kind and outcome (seed %s, %s s, commit %s)" % (r["seed"], r["seconds"], r["commit"]))
    print("%-24s %7s  %s" % ("kind", "total", "outcomes"))
    total = 0
    for kind in sorted(r["outcomes"]):
        c = r["outcomes"][kind]
        n = sum(c.values())
        total += n
        print("%-24s %7d  %s" % (kind, n, ", ".join("%s %d" % (k, v) for k, v in sorted(c.items(), key=lambda x: -x[1]))))
    print("%-24s %7d" % ("all", total))
    print()
    rows = [
        ("lost requests (no answer by the deadline)", len(r["lost"])),
        ("wrong answers", len(r["wrong"])),
        ("wardend processes (restarts by the soak)", "%d (%d)" % (len(r["daemons"]), len(r["killed_by_soak"]))),
        ("unexplained wardend deaths", len(r["unexplained_deaths"])),
        ("sessions after restarts", ", ".join("%s %d" % kv for kv in r["survival"].items()) or "-"),
        ("leaks at the end", ", ".join("%s %d" % (k, len(v)) for k, v in r.get("leaks", {}).items()) or "none"),
        ("wardend RSS at warm-up", "%s KiB (t=%s s, pid %s)" % tuple(r["rss_kib"].get("warmup", {}).get(k)
                                                                   for k in ("rss_kib", "t", "pid"))),
        ("wardend RSS at the end", "%s KiB (t=%s s, pid %s)" % tuple(r["rss_kib"].get("end", {}).get(k)
                                                                   for k in ("rss_kib", "t", "pid"))),
        ("idle fds wardend/keeper start", "%s / %s" % (r.get("idle_start", {}).get("wardend_fds"),
                                                       r.get("idle_start", {}).get("keeper_fds"))),
        ("idle fds wardend/keeper end", "%s / %s" % (r.get("idle_end", {}).get("wardend_fds"),
                                                     r.get("idle_end", {}).get("keeper_fds"))),
        ("load average start / end", "%s / %s" % (" ".join(r["loadavg_start"]), " ".join(r["loadavg_end"]))),
        ("failures", len(r["failures"])),
    ]
    for k, v in rows:
        print("%-44s %s" % (k, v))
    for name in ("lost", "wrong", "unexplained_deaths", "failures"):
        for line in r[name][:20]:
            print("  %s: %s" % (name, line))
    for k, v in r.get("leaks", {}).items():
        for line in v[:20]:
            print("  leak %s: %s" % (k, line))


if __name__ == "__main__":
    main()
