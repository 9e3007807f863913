"""Warden's benchmark suite: each figure side by side with its anchors,
measured in the same run on the same machine. `make bench` / `make
bench-quick` run it; it writes bench/results/latest.json and the generated
part of docs/benchmarks.md. Figures only: it never fails on a number (it
exits non-zero only when it could not run at all).

    /usr/bin/python3 bench/run_bench.py [--quick | --smoke --out FILE] [--bin-dir build/bin]
        [--sections cold,latency,...] [--out FILE] [--doc FILE]

Sections (in order): cold (daemon start to first result, pool fill),
latency (warm cell vs Jupyter vs a pipe), oneshot (fresh sandbox vs bwrap
and python3 -c), session (new session to first cell vs a kernel start),
commands (a command in a session's machine: RunCommand, and E2B's
commands.run('true') through the HTTP front, vs bash forked on the host),
throughput, burst (1,000 sessions at once, each answering a first cell,
over gRPC and through the E2B front, beside E2B's and Daytona's published
bursts), humaneval (Python and JavaScript, canonical and wrong), noisy
(victim latency under abusive neighbours), memory (PSS per pool worker and
idle session, how many idle sessions fit), profile (where one-shot time
goes), stages (a sandbox's life stage by stage, per language), keeper
(bench/keeper_restart: sessions answering again after wardend restarts
under warden-keeper), snapshots (bench/snapshot_bench: ForkSession of a
10 MB DataFrame, wake from hibernation), hibernation
(bench/hibernation_scale: many sessions, most hibernated, each called),
kernel_gateway (bench/kernel_gateway_bench.py: Warden's Kernel Gateway front
beside the real Jupyter Kernel Gateway from build/pyenv, `make test-deps`),
http (bench/http_load against the HTTP front: idle connections held and a
real client beside them, memory per idle connection, GET /healthz and
E2B's /execute per second, Kernel Gateway channels open at once each
answering a cell; beside nginx serving the same, and beside the HTTP
server before issue 20 when --http-baseline-bin names its wardend),
egress, templates (issue 31: `warden template import` of the Debian image
beside `umoci unpack` of it, importing it again, a one-shot from a
template's warm pool beside the default pool's, a new session in a
template without a pool or zygote).
Each runs against a wardend this script starts on its own socket under
/tmp and always stops (keeper, snapshots, hibernation and http start their
own).
"""

import argparse
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import bench_stats  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402

PYTHON = "/usr/bin/python3"
NODE = "/usr/bin/node"
BWRAP = ["/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session",
         "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"]
NUMPY_CELL = "import numpy as np; print(np.arange(10).sum())"
PANDAS_CELL = "import pandas as pd; print(pd.DataFrame({'a': [1, 2]}).a.sum())"
SECTIONS = ["cold", "latency", "oneshot", "session", "commands", "throughput", "burst", "humaneval", "noisy", "memory",
            "profile", "stages", "keeper", "snapshots", "hibernation", "fleet", "kernel_gateway", "http", "egress", "templates"]
NGINX = "/usr/sbin/nginx"

# Sizes of each section: (smoke, quick, full). Quick stays under 4
# minutes, full under 20 on the 2-core machines (keeper, snapshots and
# hibernation add about 40 s to quick and 3-5 minutes to full). Smoke is
# the smallest run in which every section still produces every figure: what
# the bench_smoke test runs in `make test`, so that a section that breaks is
# caught when it breaks (its figures mean nothing).
SIZES = {
    "cells": (100, 2000, 10000),
    "jupyter_cells": (20, 500, 2000),
    "oneshot_b2b": (3, 20, 60),
    "oneshot_warm": (2, 12, 30),
    "spawn": (2, 8, 25),
    "spawn_heavy": (1, 4, 12),
    "session_start": (2, 8, 20),
    "commands": (5, 100, 400),
    "jupyter_starts": (1, 2, 4),
    "jupyter_kernels": (1, 2, 4),
    "throughput_s": (0.5, 4, 8),
    "humaneval_problems": (2, 20, 164),
    "noisy_quiet_s": (0.5, 3, 8),
    "noisy_abused_s": (1, 6, 20),
    "hold_sessions": (3, 20, 100),
    "scale_max": (6, 60, 1000),
    "scale_seconds": (10, 25, 150),
    "sandbox_loop": (5, 50, 200),
    "stages": (2, 30, 100),
    "keeper_sessions": (2, 20, 100),
    "snapshot_forks": (1, 5, 20),
    "snapshot_wakes": (1, 2, 5),
    # The fleet (bench/fleet_bench.py): the E2B burst, the drain, cells,
    # node stops, seconds the nodes' pools get to refill after a burst.
    "fleet_burst": (3, 100, 1000),
    "fleet_drain": (2, 30, 100),
    "fleet_cells": (40, 1000, 4000),
    "fleet_partitions": (1, 3, 3),
    "fleet_settle_s": (0, 10, 10),
    # hibernation_scale: (sessions, live, seconds idle before hibernating);
    # the 10,000-session figure is a separate, longer run
    # (docs/benchmarks.md, issue 12).
    "hibernation_sessions": (4, 150, 600),
    "hibernation_live": (1, 30, 100),
    "hibernation_after_s": (1, 3, 3),
    # http: idle connections held (with a real client's requests beside
    # them), seconds of each throughput run, Kernel Gateway channels open
    # at once (one kernel each).
    "http_idle": (20, 2000, 10000),
    "http_probes": (10, 200, 1000),
    "http_rate_s": (1, 3, 8),
    "http_kernels": (3, 100, 1000),
    # burst: sessions created at once, each answering a first cell, through
    # gRPC and (the E2B SDK) through the E2B front.
    "burst": (20, 100, 1000),
    "burst_e2b": (3, 100, 1000),
    # requests waiting for a turn while wardend's memory and threads are read
    "queued": (100, 2000, 5000),
    # egress: HTTPS requests per latency series, MB of the download, pip
    # installs of the 50-package set per side.
    "egress_requests": (20, 200, 1000),
    "egress_download_mb": (8, 128, 512),
    "egress_pip_runs": (1, 1, 3),
    # templates: one-shots from the template's warm pool and from the
    # default one; new sessions in a template without a pool. (The image
    # is imported once, again once, and unpacked by umoci once.)
    "template_oneshots": (1, 12, 30),
    "template_sessions": (1, 8, 20),
}
MODES = ("smoke", "quick", "full")
# New sandboxes from a template (an image of the user's), creation to
# first answer, as published: E2B's template sandboxes "about 150 ms to
# 500 ms", CubeSandbox 48 ms (issue 31).
PUBLISHED_TEMPLATE_START = {"e2b_low_ms": 150, "e2b_high_ms": 500, "cubesandbox_ms": 48}
# The smoke run's image: the host's python3 and its standard library laid
# out as an image, without bytecode and without the extension modules
# that load more than a few small libraries (about 20 MB: the Debian image
# takes a minute where the smoke run has seconds); the others import
# tests/images/debian_image.sh's.
PYTHON_IMAGE_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "pydoc_data", "__pycache__",
                     "dist-packages", "site-packages", "config-%d.%d-x86_64-linux-gnu" % sys.version_info[:2]}
PYTHON_IMAGE_LIBS = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libz.so.1", "libexpat.so.1", "libffi.so.8",
                     "libbz2.so.1.0", "liblzma.so.5", "libmpdec.so.3", "ld-linux-x86-64.so.2"}
# Bursts of 100 at once, create to first command ("time to interactive"),
# medians: ComputeSDK's run of 2026-10-09 (docs/benchmarks.md).
PUBLISHED_BURST = {"burst": 100, "e2b_median_ms": 1333, "daytona_median_ms": 646,
                   "source": "ComputeSDK burst TTI, 100 at once, 2026-10-09"}


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(argv, timeout=600, env=None):
    """Runs a bench program; returns the JSON object it printed last."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError("%s printed no result (exit %d): %s" % (
            os.path.basename(argv[0]) if argv[0] != PYTHON else argv[1], proc.returncode,
            proc.stderr.strip()[-800:]))
    return json.loads(lines[-1])


class Daemon:
    """A wardend on its own socket and admin port, from deploy/wardend.json
    with the listeners, session caps, host-id range and (optionally) pools
    replaced. Always stopped by stop()."""

    def __init__(self, bin_dir, workdir, name, pools=None):
        self.bin_dir = bin_dir
        self.dir = pathlib.Path(workdir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "wardend.sock"
        self.addr = "unix:%s" % self.socket
        self.admin_port = free_port()
        config = json.loads((REPO / "deploy" / "wardend.json").read_text())
        config["listen"] = [self.addr]
        config["admin_listen"] = "127.0.0.1:%d" % self.admin_port
        config["sessions"]["max_total"] = 5000
        config["sessions"]["max_per_tenant"] = 5000
        config["max_concurrent_per_tenant"] = 64
        # The HTTP front on loopback, for E2B's SDK (section commands).
        self.http_port = free_port()
        config["http_listen"] = "127.0.0.1:%d" % self.http_port
        config["allow_insecure_loopback"] = True
        # Ids of their own, so tests running beside the bench never share one.
        config["executor"]["host_id_base"] = 3000000 + (os.getpid() % 1000) * 70000
        if pools is not None:
            config["pools"] = pools
        self.config = config
        self.config_path = self.dir / "wardend.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.proc = None
        self.stop_timeout = 30

    def pool_sizes(self):
        return {p["language"]: p.get("size", 2) for p in self.config["pools"]}

    def start(self):
        """Starts wardend; returns ms from the launch to the first one-shot
        result (cold start)."""
        self.log = open(self.dir / "wardend.log", "w")
        since = time.monotonic_ns()
        self.proc = subprocess.Popen([str(self.bin_dir / "wardend"), "--config", str(self.config_path)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        result = run_json([str(self.bin_dir / "warden_bench"), "first-result", "--addr", self.addr,
                           "--since-ns", str(since), "--timeout-s", "120"], timeout=180)
        if "first_result_ms" not in result:
            raise RuntimeError("wardend gave no first result: %s" % self.log_tail())
        self.started_ns = since
        return result["first_result_ms"]

    def metrics(self):
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.admin_port, timeout=10).read()
        out = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
        return out

    def pool_ready(self, language):
        return int(self.metrics().get('warden_pool_ready{language="%s"}' % language, 0))

    def wait_pools_full(self, timeout_s=120):
        """Waits until every pool is full; returns seconds waited, or None."""
        start = time.monotonic()
        sizes = self.pool_sizes()
        while time.monotonic() - start < timeout_s:
            if all(self.pool_ready(lang) >= size for lang, size in sizes.items()):
                return time.monotonic() - start
            time.sleep(0.01)
        return None

    def log_tail(self):
        try:
            return (self.dir / "wardend.log").read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.proc = None


def proc_status(pid):
    """A process's resident memory (KiB) and threads."""
    out = {}
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            out["rss_kib"] = int(line.split()[1])
        elif line.startswith("Threads:"):
            out["threads"] = int(line.split()[1])
    return out


def rss_kib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def pids_of(proc):
    """The process and its children (nginx's workers)."""
    pids = [proc.pid]
    try:
        for line in subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True,
                                   text=True).stdout.split():
            pids.append(int(line))
    except (OSError, ValueError):
        pass
    return pids


class HttpFront(Daemon):
    """A wardend serving the HTTP front on loopback without tokens (the
    README's workstation setup), sized for the http section; `baseline`
    is the wardend from before issue 20, which knows none of the http.*
    connection settings."""

    def __init__(self, bin_dir, workdir, name, kernels, baseline=False):
        super().__init__(pathlib.Path(bin_dir), workdir, name,
                         pools=[{"language": "python", "size": 4}, {"language": "javascript", "size": 0},
                                {"language": "bash", "size": 0}])
        self.port = free_port()
        config = self.config
        config["http_listen"] = "127.0.0.1:%d" % self.port
        config["allow_insecure_loopback"] = True
        config["sessions"]["max_total"] = kernels + 100
        config["sessions"]["max_per_tenant"] = kernels + 100
        config["executor"]["host_id_base"] += 30000  # beside the main daemon's range
        if baseline:
            config["http"] = {k: v for k, v in config["http"].items() if k in ("allowed_hosts", "allowed_origins")}
        else:
            config["http"]["idle_timeout_ms"] = 600000  # held for the whole measurement
            config["http"]["max_streams_per_tenant"] = kernels + 100
        self.config_path.write_text(json.dumps(config, indent=2))
        self.stop_timeout = 60

    def start(self):
        self.log = open(self.dir / "wardend.log", "w")
        self.proc = subprocess.Popen([str(self.bin_dir / "wardend"), "--config", str(self.config_path)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.port, timeout=5).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError("wardend's HTTP front did not get ready: %s" % self.log_tail())

    def call(self, method, path, body=None, headers=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        with urllib.request.urlopen(req, timeout=120) as res:
            text = res.read()
            return json.loads(text) if text else None


class Nginx:
    """nginx answering GET /healthz with "ok" and closing, as wardend does,
    and anything else with a small JSON body over kept-alive connections,
    held as long as wardend holds them: the anchor for connections a server
    of that kind holds on a few threads."""

    def __init__(self, workdir):
        self.dir = pathlib.Path(workdir) / "nginx"
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.dir / "nginx.conf"
        conf.write_text("""
user root;
worker_processes auto;
worker_rlimit_nofile 65536;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 30000; }
http {
  access_log off;
  keepalive_timeout 600s;
  keepalive_requests 1000000;
  client_body_temp_path %(d)s/tmp/body;
  proxy_temp_path %(d)s/tmp/proxy;
  fastcgi_temp_path %(d)s/tmp/fastcgi;
  uwsgi_temp_path %(d)s/tmp/uwsgi;
  scgi_temp_path %(d)s/tmp/scgi;
  server {
    listen 127.0.0.1:%(port)d;
    # As wardend's: /healthz closes the connection, the rest keeps it.
    location = /healthz { keepalive_timeout 0; default_type text/plain; return 200 "ok\\n"; }
    location / { default_type application/json; return 200 '{"gateway":"nginx","version":"1"}'; }
  }
}
""" % {"d": self.dir, "port": self.port})
        self.proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(self.dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.port, timeout=2).read()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start: %s" % (self.dir / "error.log").read_text(errors="replace")[-800:])

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Bench:
    def __init__(self, args):
        self.args = args
        self.mode = "smoke" if args.smoke else "quick" if args.quick else "full"
        self.quick = self.mode != "full"
        self.bin = pathlib.Path(args.bin_dir).resolve()
        self.tmp = tempfile.TemporaryDirectory(prefix="warden-bench-")
        self.work = pathlib.Path(self.tmp.name)
        self.results = {"mode": self.mode, "sections": {}, "errors": {}}
        self.daemon = None

    def size(self, name):
        return SIZES[name][MODES.index(self.mode)]

    def wb(self, command, *flags, timeout=900):
        return run_json([str(self.bin / "warden_bench"), command, "--addr", self.daemon.addr] +
                        [str(f) for f in flags], timeout=timeout)

    def ab(self, command, *flags, argv=(), timeout=900, env=None):
        return run_json([str(self.bin / "anchor_bench"), command] + [str(f) for f in flags] + ["--"] +
                        list(argv), timeout=timeout, env=env)

    def jupyter(self, command, *flags, timeout=600):
        env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
        return run_json([PYTHON, str(HERE / "jupyter_anchor.py"), command] + [str(f) for f in flags],
                        timeout=timeout, env=env)

    # --- sections -------------------------------------------------------

    def section_cold(self):
        out = {"pools": self.daemon.config["pools"]}
        out["first_result_ms"] = self.cold_ms
        full = self.daemon.wait_pools_full()
        out["pools_full_ms"] = None if full is None else (time.monotonic_ns() - self.daemon.started_ns) / 1e6
        return out

    def section_latency(self):
        n = self.size("cells")
        out = {"warden_x1": self.wb("cells", "--n", n, "--code", "x=1"),
               "warden_print": self.wb("cells", "--n", n // 2, "--code", "print(1)"),
               "pipe_x1": self.ab("pipe-floor", "--n", n, "--code", "x=1"),
               "jupyter_x1": self.jupyter("latency", "--n", self.size("jupyter_cells"), "--code", "x=1")}
        return out

    def section_oneshot(self):
        # Back to back, the pool drains and each run waits for a worker: that
        # is the pool's refill time. With a gap longer than that, every run
        # finds a warm worker.
        b2b = self.wb("oneshot", "--n", self.size("oneshot_b2b"), "--code", "print(1)", "--expect", "1\n")
        gap = int(min(3000, max(20, 1.3 * b2b.get("p50_ms", 100))))
        self.daemon.wait_pools_full()
        n = self.size("oneshot_warm")
        out = {"warden_b2b": b2b, "gap_ms": gap,
               "warden_warm": self.wb("oneshot", "--n", n, "--gap-ms", gap, "--code", "print(1)",
                                      "--expect", "1\n")}
        self.daemon.wait_pools_full()
        out["warden_numpy"] = self.wb("oneshot", "--n", n, "--gap-ms", gap, "--code", NUMPY_CELL,
                                      "--expect", "45\n")
        self.daemon.wait_pools_full()
        out["warden_pandas"] = self.wb("oneshot", "--n", n, "--gap-ms", gap, "--code", PANDAS_CELL,
                                       "--expect", "3\n")
        s, h = self.size("spawn"), self.size("spawn_heavy")
        out["python_c"] = self.ab("spawn", "--n", s, argv=[PYTHON, "-c", "print(1)"])
        out["bwrap_c"] = self.ab("spawn", "--n", s, argv=BWRAP + [PYTHON, "-c", "print(1)"])
        out["python_numpy"] = self.ab("spawn", "--n", h, argv=[PYTHON, "-c", NUMPY_CELL])
        out["bwrap_numpy"] = self.ab("spawn", "--n", h, argv=BWRAP + [PYTHON, "-c", NUMPY_CELL])
        out["python_pandas"] = self.ab("spawn", "--n", h, argv=[PYTHON, "-c", PANDAS_CELL])
        out["bwrap_pandas"] = self.ab("spawn", "--n", h, argv=BWRAP + [PYTHON, "-c", PANDAS_CELL])
        return out

    def section_session(self):
        self.daemon.wait_pools_full()
        gap = self.results["sections"].get("oneshot", {}).get("gap_ms", 500)
        return {"warden": self.wb("session-start", "--n", self.size("session_start"), "--gap-ms", gap),
                "jupyter": self.jupyter("start", "--n", self.size("jupyter_starts"))}

    def section_commands(self):
        """A command in a session's machine, each to its end: RunCommand over
        warden.v1 (warden_bench commands), and commands.run('true') through
        the E2B front with the unmodified SDK and with a bare Connect client
        (bench/e2b_commands.mjs, which tests/e2b's SDK serves: `make
        test-deps`). All run `bash -l -c true`, as E2B's SDK sends it; the
        anchor forks and execs the same bash on the host. Then `/bin/true`
        alone through RunCommand beside `/bin/true` spawned on the host: the
        machine's own cost without bash's login start."""
        n = self.size("commands")
        # The host's bash reads /etc/profile as the sandbox's does, and a home
        # with no startup files of its own, as the sandbox user's.
        with tempfile.TemporaryDirectory() as home:
            host_bash = self.ab("spawn", "--n", n, argv=["/bin/bash", "-l", "-c", "true"],
                                env=dict(os.environ, HOME=home))
        out = {"warden_grpc": self.wb("commands", "--n", n),
               "host_bash": host_bash,
               "warden_exec": self.wb("commands", "--n", n, "--exec", "/bin/true"),
               "host_exec": self.ab("spawn", "--n", n, argv=["/bin/true"])}
        base = "http://127.0.0.1:%d" % self.daemon.http_port
        env = dict(os.environ, E2B_API_URL=base, E2B_SANDBOX_URL=base,
                   E2B_API_KEY="e2b_" + "0" * 32)
        e2b = run_json([NODE, str(HERE / "e2b_commands.mjs"), "--n", str(n)], timeout=600, env=env)
        out["e2b_sdk"], out["e2b_raw"] = e2b.get("sdk"), e2b.get("raw")
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def section_throughput(self):
        seconds = self.size("throughput_s")
        self.daemon.wait_pools_full()
        out = {"warden_oneshot": self.wb("throughput", "--mode", "oneshot", "--clients", 8,
                                         "--seconds", seconds),
               "bwrap_oneshot": self.ab("spawn-throughput", "--clients", 8, "--seconds", seconds,
                                        argv=BWRAP + [PYTHON, "-c", "print(1)"])}
        # The same path for JavaScript and bash one-shots, beside their anchors.
        for language, argv, code in (("javascript", [NODE, "-e", "console.log(1)"], "console.log(1)"),
                                     ("bash", ["/bin/bash", "-c", "echo 1"], "echo 1")):
            self.daemon.wait_pools_full()
            out["warden_oneshot_" + language] = self.wb("throughput", "--mode", "oneshot", "--clients", 8,
                                                        "--seconds", seconds, "--language", language,
                                                        "--code", code)
            out["bwrap_oneshot_" + language] = self.ab("spawn-throughput", "--clients", 8, "--seconds", seconds,
                                                       argv=BWRAP + argv)
        self.daemon.wait_pools_full()
        out["warden_cells"] = self.wb("throughput", "--mode", "cells", "--clients", 8, "--seconds", seconds)
        out["jupyter_cells"] = self.jupyter("throughput", "--kernels", self.size("jupyter_kernels"),
                                            "--seconds", seconds)
        return out

    def section_burst(self):
        """Issue 28: N clients at once, each CreateSession then its first
        cell (`x=1`), over gRPC with a 300 s deadline and no retry (warden_bench
        burst): when each had answered, counted from the burst's start, and
        how many were refused. Then N E2B sandboxes at once through the E2B
        front with the unmodified SDK, each `Sandbox.create` then
        `commands.run('echo ready')` (tests/fleet/e2b_burst.mjs). Beside E2B's
        and Daytona's published medians for a burst of 100."""
        n, e2b_n = self.size("burst"), self.size("burst_e2b")
        out = {"published": PUBLISHED_BURST, "loadavg": open("/proc/loadavg").read().split()[:3]}
        rss_before = rss_kib(self.daemon.proc.pid)
        if n > PUBLISHED_BURST["burst"]:
            # The anchors' own size first.
            self.daemon.wait_pools_full()
            out["grpc_100"] = self.wb("burst", "--n", PUBLISHED_BURST["burst"], "--deadline-s", 300, timeout=1800)
        self.daemon.wait_pools_full()
        out["grpc"] = self.wb("burst", "--n", n, "--deadline-s", 300, timeout=1800)
        out["daemon_rss_kib"] = {"before": rss_before, "after": rss_kib(self.daemon.proc.pid)}
        self.daemon.wait_pools_full()
        base = "http://127.0.0.1:%d" % self.daemon.http_port
        env = dict(os.environ, E2B_API_URL=base, E2B_SANDBOX_URL=base, E2B_API_KEY="e2b_" + "0" * 32)
        out["e2b"] = run_json([NODE, str(REPO / "tests" / "fleet" / "e2b_burst.mjs"), str(e2b_n)], timeout=1800,
                              env=env)
        out["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
        out["queued"] = self.queued(self.size("queued"))
        return out

    def queued(self, n):
        """What waiting costs wardend: its RSS and threads before and while
        `n` cells wait for their tenant's one turn (a daemon of its own, with
        max_concurrent_per_tenant 1; warden_bench queued), then how soon all
        were served once the turn came back."""
        daemon = Daemon(self.bin, self.work, "queued", pools=[{"language": "python", "size": 1, "warm": []},
                                                            {"language": "javascript", "size": 0},
                                                            {"language": "bash", "size": 0}])
        daemon.config["max_concurrent_per_tenant"] = 1
        daemon.config["queue"]["max_waiting_per_tenant"] = n + 10
        daemon.config_path.write_text(json.dumps(daemon.config, indent=2))
        out = {"waiting": n}
        try:
            daemon.start()
            daemon.wait_pools_full()
            client = subprocess.Popen([str(self.bin / "warden_bench"), "queued", "--addr", daemon.addr, "--n", str(n)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

            def step(line=None):
                if line:
                    client.stdin.write(line + "\n")
                    client.stdin.flush()
                answer = client.stdout.readline()
                if not answer:
                    raise RuntimeError("warden_bench queued ended early (exit %s)" % client.wait())
                return json.loads(answer)

            try:
                step()
                time.sleep(0.3)
                out["before"] = proc_status(daemon.proc.pid)
                step("send")
                deadline = time.monotonic() + 120
                while daemon.metrics().get("warden_admission_waiting", 0) < n:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the %d cells never all waited (%s)" % (
                            n, daemon.metrics().get("warden_admission_waiting")))
                    time.sleep(0.05)
                time.sleep(0.3)
                out["waiting_now"] = proc_status(daemon.proc.pid)
                out["served"] = step("release")
            finally:
                if client.poll() is None:
                    client.kill()
                client.wait()
            before, during = out["before"], out["waiting_now"]
            out["rss_kib_per_waiting"] = (during["rss_kib"] - before["rss_kib"]) / n
            out["threads_added"] = during["threads"] - before["threads"]
        finally:
            daemon.stop()
        return out

    def section_humaneval(self):
        files = workloads.write_all(self.work / "workloads")
        n = self.size("humaneval_problems")
        if n < 164:
            for name, path in list(files.items()):
                subset = path.with_name(path.stem + "_subset.jsonl")
                subset.write_text("".join(path.read_text().splitlines(True)[:n]))
                files[name] = subset
        # HumanEval imports only the standard library, so it runs against a
        # daemon whose Python pool warms nothing, as an operator would set
        # it up for this workload (docs/benchmarks.md says so).
        lean_pools = [dict(p, warm=[]) for p in self.daemon.config["pools"]]
        lean = Daemon(self.bin, self.work, "humaneval", pools=lean_pools)
        out = {"problems": n, "pools": lean_pools}
        main, self.daemon = self.daemon, lean
        try:
            lean.start()
            lean.wait_pools_full()
            for name in ("python_canonical", "python_wrong", "js_canonical", "js_wrong"):
                log("  humaneval %s through Warden" % name)
                out["warden_" + name] = self.wb("suite", "--file", files[name], "--clients", 4,
                                                "--timeout-ms", 10000)
                lean.wait_pools_full()
        finally:
            lean.stop()
            self.daemon = main
        log("  humaneval anchors")
        out["subprocess_python_canonical"] = self.ab("suite", "--file", files["python_canonical"],
                                                     "--clients", 1, argv=[PYTHON, "-c"])
        out["subprocess_python_wrong"] = self.ab("suite", "--file", files["python_wrong"],
                                                 "--clients", 1, argv=[PYTHON, "-c"])
        out["harness_python_canonical"] = run_json(
            [PYTHON, str(HERE / "humaneval_harness.py"), str(files["python_canonical"]), "--workers", "4"])
        out["subprocess_js_canonical"] = self.ab("suite", "--file", files["js_canonical"], "--clients", 1,
                                                 argv=[NODE, "-e"])
        return out

    def section_noisy(self):
        self.daemon.wait_pools_full()
        q, a = self.size("noisy_quiet_s"), self.size("noisy_abused_s")
        return {"warden": self.wb("noisy", "--quiet-s", q, "--abused-s", a, "--per-kind", 1, timeout=600),
                "jupyter": self.jupyter("noisy", "--seconds", q, "--burners", 2)}

    def _warden_pss(self):
        """PSS (KiB) below wardend, split by the workers' language: each unit
        is a direct child of wardend with everything under it."""
        table = bench_stats.process_table()
        root = self.daemon.proc.pid
        units = {}
        for pid, (ppid, _) in table.items():
            if ppid == root:
                tree = [pid] + bench_stats.descendants(pid, table)
                comms = {table[p][1] for p in tree if p in table}
                # Interpreters may rename themselves (the zygote's children
                # are "warden-python-z...").
                lang = "python" if any("python" in c for c in comms) else \
                    "javascript" if any("node" in c for c in comms) else \
                    "bash" if any("bash" in c for c in comms) else "other"
                kib = sum(bench_stats.pss_kib(p) for p in tree)
                units.setdefault(lang, []).append(kib)
        return {"daemon_kib": bench_stats.pss_kib(root), "units": units,
                "total_kib": bench_stats.pss_kib(root) + sum(sum(v) for v in units.values())}

    def section_memory(self):
        out = {}
        self.daemon.wait_pools_full()
        time.sleep(0.5)
        idle = self._warden_pss()
        sizes = self.daemon.pool_sizes()
        out["pool_idle"] = idle
        py = idle["units"].get("python", [])
        out["python_pool_worker_mib"] = (sum(py) / max(1, sizes.get("python", 1))) / 1024 if py else None
        mem_total_mb = int(open("/proc/meminfo").read().split()[1]) // 1024
        # Leave most of the shared machine to everyone else.
        floor_mb = max(8192, int(mem_total_mb * 0.35))
        hold = subprocess.Popen([str(self.bin / "warden_bench"), "hold", "--addr", self.daemon.addr,
                                 "--max", str(self.size("hold_sessions")), "--seconds",
                                 str(self.size("scale_seconds")), "--min-avail-mb", str(floor_mb)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def command(cmd):
            if cmd:
                hold.stdin.write(cmd + "\n")
                hold.stdin.flush()
            return json.loads(hold.stdout.readline())

        try:
            opened = command(None)
            out["hold"] = opened
            self.daemon.wait_pools_full()
            time.sleep(0.5)
            with_sessions = self._warden_pss()
            out["with_sessions"] = {"total_kib": with_sessions["total_kib"], "daemon_kib":
                                    with_sessions["daemon_kib"]}
            held = opened["held"]
            out["idle_session_mib"] = ((with_sessions["total_kib"] - idle["total_kib"]) / max(1, held)) / 1024
            out["probe_at_hold"] = command("probe")
            log("  memory: growing to %d sessions (%d s at most, MemAvailable floor %d MiB)" % (
                self.size("scale_max"), self.size("scale_seconds"), floor_mb))
            out["scale"] = command("grow %d %d" % (self.size("scale_max"), self.size("scale_seconds")))
            out["scale"]["mem_floor_mb"] = floor_mb
            out["probe_at_scale"] = command("probe")
            out["close"] = command("close")
        finally:
            if hold.poll() is None:
                try:
                    hold.stdin.close()
                    hold.wait(timeout=300)
                except (OSError, subprocess.TimeoutExpired):
                    hold.kill()
        out["jupyter"] = self.jupyter("memory", "--kernels", self.size("jupyter_kernels"))
        return out

    def section_profile(self):
        """Where a one-shot's time goes: the parts measured alone, same run."""
        out = {}
        loop = subprocess.run([str(self.bin / "sandbox_loop"), str(self.size("sandbox_loop"))],
                              capture_output=True, text=True, timeout=300)
        fields = dict(kv.split("=") for kv in loop.stdout.split() if "=" in kv)
        out["sandbox_true_p50_ms"] = float(fields.get("p50_ms", "nan"))
        h = self.size("spawn_heavy")
        out["python_S"] = self.ab("spawn", "--n", self.size("spawn"), argv=[PYTHON, "-S", "-c", "pass"])
        out["python_import_numpy_pandas"] = self.ab("spawn", "--n", h, argv=[
            PYTHON, "-c", "import numpy, pandas"])
        warm = [p.get("warm", []) for p in self.daemon.config["pools"] if p["language"] == "python"]
        out["pool_warm_modules"] = warm[0] if warm else []
        return out

    def section_stages(self):
        """The life of one sandbox, stage by stage (bench/sandbox_stages.cc),
        for each language, one sandbox after the other, with the load
        average it ran under."""
        out = {"loadavg": open("/proc/loadavg").read().split()[:3]}
        for language in ("python", "javascript", "bash"):
            out[language] = run_json([str(self.bin / "sandbox_stages"), "--n", str(self.size("stages")),
                                      "--language", language], timeout=600)
        return out

    def section_keeper(self):
        """bench/keeper_restart: N live sessions, wardend restarted under
        warden-keeper by SIGTERM and by kill -9; the time until every
        session answered its own value again."""
        n = self.size("keeper_sessions")
        proc = subprocess.run([str(self.bin / "keeper_restart"), "--sessions", str(n)], capture_output=True,
                              text=True, timeout=900)
        out = {"sessions_asked": n, "output": proc.stdout.strip().splitlines()[-4:]}
        live = re.search(r"keeper_restart: (\d+) live", proc.stdout)
        out["sessions"] = int(live.group(1)) if live else None
        pattern = (r"after (SIGTERM|kill -9)\s+every session answered again: (\d+)/(\d+); ([\d.]+) ms after the "
                   r"signal, ([\d.]+) ms after the new wardend's start")
        for m in re.finditer(pattern, proc.stdout):
            key = "sigterm" if m.group(1) == "SIGTERM" else "kill9"
            out[key] = {"answered": int(m.group(2)), "sessions": int(m.group(3)),
                        "after_signal_ms": float(m.group(4)), "after_start_ms": float(m.group(5))}
        if "sigterm" not in out and "kill9" not in out:
            raise RuntimeError("keeper_restart printed no figures (exit %d): %s" % (
                proc.returncode, (proc.stdout + proc.stderr).strip()[-800:]))
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def section_snapshots(self):
        """bench/snapshot_bench, through its own CLI: ForkSession of a
        session holding a 10 MB DataFrame (new sandbox included), the
        fork's first cell, and a hibernated session's first answered cell."""
        forks, wakes = self.size("snapshot_forks"), self.size("snapshot_wakes")
        proc = subprocess.run([str(self.bin / "snapshot_bench"), str(forks), str(wakes)], capture_output=True,
                              text=True, timeout=900)
        out = {"forks": forks, "wakes": wakes, "lines": {}}
        for m in re.finditer(r"^(.*?)\s+p50\s+([\d.]+) ms\s+max\s+([\d.]+) ms\s+\(n=(\d+)\)", proc.stdout, re.M):
            label = m.group(1).strip()
            figure = {"label": label, "p50_ms": float(m.group(2)), "max_ms": float(m.group(3)), "n": int(m.group(4))}
            out["lines"][label] = figure
            lower = label.lower()
            if "hibernat" in lower:
                out["wake"] = figure
            elif "first cell" in lower:
                out["fork_first_cell"] = figure
            elif lower.startswith("forksession"):
                out["fork"] = figure
        if not out["lines"]:
            raise RuntimeError("snapshot_bench printed no figures (exit %d): %s" % (
                proc.returncode, (proc.stdout + proc.stderr).strip()[-800:]))
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def section_hibernation(self):
        """bench/hibernation_scale at this mode's size: N sessions, all but
        L hibernated, each called once."""
        n, live = self.size("hibernation_sessions"), self.size("hibernation_live")
        out = run_json([str(self.bin / "hibernation_scale"), "--sessions", str(n), "--live", str(live),
                        "--hibernate-after", str(self.size("hibernation_after_s")), "--create-minutes", "8"],
                       timeout=1800)
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def section_fleet(self):
        """bench/fleet_bench.py: warden-gateway and three nodes of its own
        on loopback (this section's main wardend idles meanwhile)."""
        return run_json([PYTHON, str(HERE / "fleet_bench.py"), "--bin-dir", str(self.bin),
                         "--burst", str(self.size("fleet_burst")), "--drain", str(self.size("fleet_drain")),
                         "--cells", str(self.size("fleet_cells")), "--partitions", str(self.size("fleet_partitions")),
                         "--settle-s", str(self.size("fleet_settle_s"))], timeout=3600)

    def section_egress(self):
        """bench/egress_bench: the egress proxy's added latency to an HTTPS
        request (tunnelled, and with TLS terminated) and one download's
        throughput, beside the same client going directly, on loopback;
        bench/egress_pip_bench.py: pip installing 50 packages from a local
        HTTPS index in a session, through the proxy, beside the host's pip
        straight to it (both in network namespaces of their own)."""
        out = run_json([str(self.bin / "egress_bench"), "--requests", str(self.size("egress_requests")),
                        "--download-mb", str(self.size("egress_download_mb"))], timeout=900)
        out["pip"] = run_json(["unshare", "--net", "--mount", "--", PYTHON, str(HERE / "egress_pip_bench.py"),
                               "--bin-dir", str(self.bin), "--runs", str(self.size("egress_pip_runs"))], timeout=1800)
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def section_kernel_gateway(self):
        """bench/kernel_gateway_bench.py with the tests' virtualenv: the same
        client against Warden's Kernel Gateway front and the real Jupyter
        Kernel Gateway (PyPI), one after the other."""
        python = self.bin.parent / "pyenv" / "bin" / "python"
        if not python.exists():
            raise RuntimeError("%s is missing: run `make test-deps`" % python)
        argv = [str(python), str(HERE / "kernel_gateway_bench.py"), "--bin-dir", str(self.bin)]
        out = run_json(argv + {"smoke": ["--smoke"], "quick": ["--quick"], "full": []}[self.mode], timeout=1800)
        out["loadavg"] = open("/proc/loadavg").read().split()[:3]
        return out

    def http_load(self, mode, port, *flags, timeout=1800):
        return run_json([str(self.bin / "http_load"), mode, "--port", str(port)] + [str(f) for f in flags],
                        timeout=timeout)

    def http_server(self, port, pids):
        """What one server does: idle connections held with a real client
        beside them, and GET /healthz per second."""
        pid_flags = []
        for pid in pids:
            pid_flags += ["--server-pid", pid]
        # Idle connections are answered GET /api (the Kernel Gateway's info,
        # kept alive; the admin endpoints close every connection), the real
        # client asks GET /healthz on a fresh connection each time.
        out = {"idle": self.http_load("idle", port, "--connections", self.size("http_idle"), "--probes",
                                      self.size("http_probes"), "--path", "/api", "--probe-path", "/healthz",
                                      *pid_flags),
               "healthz": self.http_load("rate", port, "--path", "/healthz", "--clients", 8, "--seconds",
                                         self.size("http_rate_s")),
               "api": self.http_load("rate", port, "--path", "/api", "--clients", 8, "--seconds",
                                     self.size("http_rate_s"))}
        return out

    def http_execute(self, front):
        """E2B's /execute, one sandbox per client: `print(1)` per second."""
        sandboxes = [front.call("POST", "/sandboxes", {}) for _ in range(4)]
        ids = ",".join(s["sandboxID"] for s in sandboxes)
        tokens = ",".join(s["envdAccessToken"] for s in sandboxes)
        result = self.http_load("rate", front.port, "--method", "POST", "--path", "/execute", "--body",
                                json.dumps({"code": "print(1)"}), "--header", "Content-Type:application/json",
                                "--each-client-header", "E2b-Sandbox-Id:" + ids,
                                "--each-client-header", "X-Access-Token:" + tokens, "--clients", 4,
                                "--seconds", self.size("http_rate_s"))
        for s in sandboxes:
            front.call("DELETE", "/sandboxes/%s" % s["sandboxID"])
        return result

    def section_http(self):
        """Issue 20: the HTTP front against 10,000 connections. The same
        client (bench/http_load) against wardend, against nginx, and against
        the wardend from before the asynchronous server (a thread per
        connection, at most 256) when --http-baseline-bin gives it."""
        kernels = self.size("http_kernels")
        out = {"kernels_asked": kernels, "loadavg": open("/proc/loadavg").read().split()[:3]}
        front = HttpFront(self.bin, self.work, "http", kernels)
        try:
            front.start()
            out["warden"] = self.http_server(front.port, [front.proc.pid])
            out["warden"]["execute"] = self.http_execute(front)
            log("http: %d Kernel Gateway channels" % kernels)
            out["warden"]["kernels"] = self.http_load("kernels", front.port, "--kernels", kernels,
                                                      "--server-pid", front.proc.pid, timeout=3600)
        finally:
            front.stop()
        baseline = self.args.http_baseline_bin
        if baseline:
            old = HttpFront(baseline, self.work, "http-baseline", kernels, baseline=True)
            try:
                old.start()
                out["baseline"] = self.http_server(old.port, [old.proc.pid])
                out["baseline"]["execute"] = self.http_execute(old)
            finally:
                old.stop()
        if os.path.exists(NGINX):
            nginx = Nginx(self.work)
            try:
                out["nginx"] = self.http_server(nginx.port, pids_of(nginx.proc))
            finally:
                nginx.stop()
        else:
            out["nginx_missing"] = "%s is not installed (make bench-deps installs nginx-light)" % NGINX
        return out

    def template_image(self):
        """The image this mode imports: (archive, layout directory, ref, what).
        Smoke: the host's python3 laid out as an image; else the Debian
        image of the template tests (cached by tests/images/debian_image.sh)."""
        layout = self.work / "image-layout"
        if self.mode == "smoke":
            archive = self.work / "python-image.tar"
            write_python_image(layout, archive)
            return archive, layout, "python", "the host's python3 and its standard library"
        proc = subprocess.run([str(REPO / "tests" / "images" / "debian_image.sh")], capture_output=True, text=True,
                              timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError("tests/images/debian_image.sh failed: %s" % proc.stderr.strip()[-800:])
        archive = pathlib.Path(proc.stdout.strip().splitlines()[-1])
        layout.mkdir()
        subprocess.run(["tar", "-C", str(layout), "-xf", str(archive)], check=True)
        return archive, layout, "debian", "tests/images/debian_image.sh's Debian 12 image"

    def warden_cli(self, daemon, *args, timeout=1800):
        proc = subprocess.run([str(self.bin / "warden"), "--addr", daemon.addr] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError("warden %s failed (%d): %s" % (" ".join(map(str, args[:3])), proc.returncode,
                                                              proc.stderr.strip()[-800:]))
        return proc.stdout

    def timed_import(self, daemon, archive, name, ref):
        subprocess.run(["sync"], check=True)
        start = time.monotonic()
        self.warden_cli(daemon, "template", "import", archive, "--name", name, "--ref", ref)
        return time.monotonic() - start

    def section_templates(self):
        """Issue 31. A wardend with a template store of its own imports the
        image (`warden template import`, timed from the CLI's start to its
        end), then the same image again under another name (its layer is in
        the store already); `umoci unpack` of the same image (from its OCI
        layout, extracted beforehand: its reading of a directory is not
        counted, the import's of the archive is). Then a wardend on that
        store with a warm Python pool in the template beside the default
        one: one-shot `print(1)` from each, spaced so that a warm worker is
        ready; and new sessions in the template imported again, which has
        no pool (nor a zygote: the image's interpreter starts for each), to
        their first answered cell."""
        out = {"loadavg": open("/proc/loadavg").read().split()[:3], "published": PUBLISHED_TEMPLATE_START}
        archive, layout, ref, what = self.template_image()
        out["image"] = {"what": what, "archive_bytes": archive.stat().st_size}
        subprocess.run(["cat", str(archive)], stdout=subprocess.DEVNULL, check=True)  # both read it from memory
        store = self.work / "template-store"
        small_pools = [{"language": "python", "size": 1, "warm": []}, {"language": "javascript", "size": 0},
                       {"language": "bash", "size": 0}]
        importer = Daemon(self.bin, self.work, "templates-import", pools=small_pools)
        importer.config["templates"] = {"dir": str(store)}
        importer.config["volumes"] = {"dir": str(self.work / "volumes")}
        importer.config["executor"]["host_id_base"] += 40000
        importer.config_path.write_text(json.dumps(importer.config, indent=2))
        try:
            importer.start()
            log("  templates: importing %s (%d MB)" % (what, archive.stat().st_size >> 20))
            out["import_first_s"] = self.timed_import(importer, archive, "image", ref)
            out["import_again_s"] = self.timed_import(importer, archive, "image-again", ref)
            shown = json.loads(self.warden_cli(importer, "template", "show", "image", "--json"))
            out["image"]["unpacked_bytes"] = shown.get("size_bytes")
            out["image"]["languages"] = shown.get("languages")
            python = (shown.get("languages") or {}).get("python") or {}
            if not python.get("available"):
                raise RuntimeError("the image cannot run Python sessions: %s" % python.get("note"))
        finally:
            importer.stop()
        bundle = self.work / "umoci-bundle"
        subprocess.run(["sync"], check=True)
        start = time.monotonic()
        proc = subprocess.run(["umoci", "unpack", "--image", "%s:%s" % (layout, ref), str(bundle)],
                              capture_output=True, text=True, timeout=1800)
        out["umoci_unpack_s"] = time.monotonic() - start
        if proc.returncode != 0:
            raise RuntimeError("umoci unpack failed: %s" % proc.stderr.strip()[-800:])
        shutil.rmtree(bundle)

        size = 1 if self.mode == "smoke" else 2
        pools = [{"language": "python", "size": size, "warm": []},
                 {"language": "python", "size": size, "warm": [], "template": "image"},
                 {"language": "javascript", "size": 0}, {"language": "bash", "size": 0}]
        daemon = Daemon(self.bin, self.work, "templates", pools=pools)
        daemon.config["templates"] = {"dir": str(store)}
        daemon.config["volumes"] = {"dir": str(self.work / "volumes")}
        daemon.config["executor"]["host_id_base"] += 40000
        daemon.config_path.write_text(json.dumps(daemon.config, indent=2))
        main, self.daemon = self.daemon, daemon
        try:
            daemon.start()

            def pools_full():
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    m = daemon.metrics()
                    if (m.get('warden_pool_ready{language="python"}', 0) >= size and
                            m.get('warden_pool_ready{language="python@image"}', 0) >= size):
                        return
                    time.sleep(0.01)
                raise RuntimeError("the pools did not fill in 120 s: %s" % daemon.log_tail())

            n = self.size("template_oneshots")
            pools_full()
            # Spaced as section oneshot spaces its warm runs, so that a worker is ready.
            gap = 100
            if self.mode != "smoke":
                probe = self.wb("oneshot", "--n", 2, "--code", "print(1)", "--expect", "1\n", "--template", "image")
                gap = int(min(3000, max(100, 1.3 * probe.get("p50_ms", 300))))
                pools_full()
            out["oneshot_template"] = self.wb("oneshot", "--n", n, "--gap-ms", gap, "--code", "print(1)",
                                              "--expect", "1\n", "--template", "image")
            pools_full()
            out["oneshot_default"] = self.wb("oneshot", "--n", n, "--gap-ms", gap, "--code", "print(1)",
                                             "--expect", "1\n")
            out["oneshot_gap_ms"] = gap
            pools_full()
            out["session_template"] = self.wb("session-start", "--n", self.size("template_sessions"), "--gap-ms",
                                              100, "--template", "image-again")
            out["session_default"] = self.wb("session-start", "--n", self.size("template_sessions"), "--gap-ms", 100)
        finally:
            daemon.stop()
            self.daemon = main
        out["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
        for key in ("oneshot_template", "oneshot_default", "session_template", "session_default"):
            if out[key].get("failures"):
                raise RuntimeError("%s: %s failed: %s" % (key, out[key]["failures"], out[key].get("last_failure")))
        return out

    # --- driver ---------------------------------------------------------

    def run(self, sections):
        self.results["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.results["host"] = host_info()
        started = time.monotonic()
        self.daemon = Daemon(self.bin, self.work, "main")
        try:
            log("starting wardend (%s)" % self.daemon.config_path)
            self.cold_ms = self.daemon.start()
            for name in sections:
                log("section %s" % name)
                t = time.monotonic()
                try:
                    self.results["sections"][name] = getattr(self, "section_" + name)()
                except Exception as e:  # one failed section must not lose the others
                    self.results["errors"][name] = "%s: %s" % (type(e).__name__, e)
                    log("section %s failed: %s" % (name, e))
                    if self.daemon.proc is None or self.daemon.proc.poll() is not None:
                        log("wardend died; restarting it: %s" % self.daemon.log_tail())
                        self.daemon.stop()
                        self.daemon.start()
                self.results.setdefault("section_seconds", {})[name] = round(time.monotonic() - t, 1)
        finally:
            self.daemon.stop()
            self.tmp.cleanup()
        self.results["total_seconds"] = round(time.monotonic() - started, 1)


def write_python_image(layout, archive):
    """An OCI image layout at `layout`, and its tar at `archive`, of the
    host's python3: the interpreter, its standard library (no bytecode,
    tests, tkinter or site packages; extension modules loading only
    PYTHON_IMAGE_LIBS) and the libraries they load, at their own paths
    under /usr with merged-/usr links."""
    import hashlib
    import io
    import tarfile
    python = os.path.realpath("/usr/bin/python3")
    stdlib = "/usr/lib/python%d.%d" % sys.version_info[:2]
    files = {python}
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in PYTHON_IMAGE_SKIP]
        files.update(os.path.join(root, n) for n in names)
    # ldd of them all at once: "FILE:" then its libraries, "NAME => PATH (addr)" or "PATH (addr)".
    needs, current = {}, None
    ldd = subprocess.run(["ldd", python] + sorted(f for f in files if f.endswith(".so")), capture_output=True,
                         text=True).stdout
    for line in ldd.splitlines():
        if not line.startswith(("\t", " ")):
            current = line.rstrip(":")
            needs[current] = set()
            continue
        parts = line.split()
        target = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if target.startswith("/"):
            needs[current].add(target)
    loaded = set()
    for path, libs in needs.items():
        if path != python and any(os.path.basename(lib) not in PYTHON_IMAGE_LIBS for lib in libs):
            files.discard(path)  # _ssl, _sqlite3, readline, ...: the kernel needs none of them
        else:
            loaded |= libs
    for lib in loaded:  # where merged /usr puts it
        files.add(os.path.join(os.path.realpath(os.path.dirname(lib)), os.path.basename(lib)))
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({os.path.dirname(f) for f in files} | {"/usr/bin", "/etc", "/tmp"})
        made = set()
        for d in dirs:
            parts = d.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in made:
                    made.add(sub)
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                             ("usr/bin/python3", os.path.basename(python))):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for f in sorted(files):
            st = os.stat(f)
            info = tarfile.TarInfo(f.lstrip("/"))
            info.size, info.mode, info.mtime = st.st_size, st.st_mode & 0o7777, int(st.st_mtime)
            with open(f, "rb") as content:
                tar.addfile(info, content)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data):
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": "sha256:" + digest, "size": len(data)}

    diff = put(layer.getvalue())
    config = put(json.dumps({"architecture": "amd64", "os": "linux",
                             "config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"], "WorkingDir": "/"},
                             "rootfs": {"type": "layers", "diff_ids": [diff["digest"]]}}).encode())
    manifest = put(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
        "layers": [dict(diff, mediaType="application/vnd.oci.image.layer.v1.tar")]}).encode())
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
             annotations={"org.opencontainers.image.ref.name": "python"})]}))
    subprocess.run(["tar", "-C", str(layout), "-cf", str(archive), "."], check=True)


def host_info():
    info = {"kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        info["mem_total_mb"] = int(open("/proc/meminfo").read().split()[1]) // 1024
        info["loadavg_at_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    try:
        info["git"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short run (under 4 minutes)")
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest run in which every section produces its figures (a test, not a "
                             "measure); writes only --out, never the docs")
    parser.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "latest.json"))
    parser.add_argument("--doc", default=str(REPO / "docs" / "benchmarks.md"))
    parser.add_argument("--http-baseline-bin", default="",
                        help="a directory with the wardend (and its zygote) to compare the HTTP front with")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run_bench.py needs root: wardend builds sandboxes (user namespaces, cgroups)")
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        sys.exit("unknown sections %s; known: %s" % (sorted(unknown), ", ".join(SECTIONS)))
    if args.smoke and args.out == parser.get_default("out"):
        sys.exit("--smoke writes its figures to --out FILE only: they must not replace a real run's")
    bench = Bench(args)
    bench.run(sections)
    results = bench.results
    results["figures"] = report.figures(results)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if args.smoke:
        log("wrote %s in %.0f s" % (out, results["total_seconds"]))
        return
    report.write_doc(results, pathlib.Path(args.doc))
    log("wrote %s and %s in %.0f s" % (out, args.doc, results["total_seconds"]))
    print(report.table(results))


if __name__ == "__main__":
    main()
