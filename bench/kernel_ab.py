"""Two versions of the Python kernel side by side: warm cells, interleaved.

    /usr/bin/python3 bench/kernel_ab.py --a OLD/warden_kernel.py
        --b NEW/warden_kernel.py [--rounds 10] [--cells 500]
        [--warm numpy,pandas] [--code x=1 --code 'print(1)'] [--json]

    # a commit's kernel: git show REV:kernel/python/warden_kernel.py > /tmp/a/warden_kernel.py
    # (with its siblings, warden_magics.py and warden_snapshot.py, beside it)

Each kernel runs as its own process driven directly over the kernel
protocol (docs/kernel-protocol.md), outside any sandbox, as
kernel/testing/kernel_harness.py drives it, so nothing but the kernel is
measured. Every round runs a block of cells on each kernel, the two in a
random order, so that whatever else the machine does falls on both alike;
each block is watched by `perf stat` (when perf is there), which gives the
kernel's own CPU time, syscalls and context switches per cell: figures
that load barely moves, where the round trip's p90 moves with every
compile on the machine. Round trips are reported as bench_stats.summarize
does. Figures only; it asserts nothing.
"""

import argparse
import fcntl
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_stats  # noqa: E402

PERF_EVENTS = {"task-clock": "cpu_us", "raw_syscalls:sys_enter": "syscalls",
               "context-switches": "context_switches"}


class Kernel:
    """A kernel process and the client end of its channel (fd 3)."""

    def __init__(self, kernel_file, warm):
        self.channel, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "HOME": "/tmp",
               "WARDEN_CHANNEL_FD": "3", "WARDEN_WARM": warm}
        child_fd = child.fileno()
        out_r, out_w = os.pipe()

        def setup():
            os.dup2(child_fd, 3)
            os.setsid()

        self.proc = subprocess.Popen(["/usr/bin/python3", str(pathlib.Path(kernel_file).resolve())],
                                     stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env, cwd="/tmp",
                                     preexec_fn=setup, close_fds=False)
        os.close(out_w)
        child.close()
        # Output (print's) is drained after each cell; a kernel that died is
        # reported with what it wrote.
        self.output = out_r
        fcntl.fcntl(out_r, fcntl.F_SETFL, os.O_NONBLOCK)
        self.buf = bytearray()
        self.next_id = 1
        ready = json.loads(self.read_frame())
        if ready.get("type") != "ready":
            raise RuntimeError("%s did not start: %r" % (kernel_file, ready))

    def read_frame(self):
        while True:
            newline = self.buf.find(b"\n")
            if newline >= 0:
                size = int(self.buf[:newline])
                if len(self.buf) >= newline + 1 + size:
                    body = bytes(self.buf[newline + 1:newline + 1 + size])
                    del self.buf[:newline + 1 + size]
                    return body
            chunk = self.channel.recv(1 << 16)
            if not chunk:
                raise RuntimeError("the kernel closed its channel: %s" % self.drain().decode(errors="replace"))
            self.buf += chunk

    def drain(self):
        out = b""
        try:
            while True:
                data = os.read(self.output, 1 << 16)
                if not data:
                    return out
                out += data
        except BlockingIOError:
            return out

    def cell(self, code):
        """Runs one cell; returns its round trip in milliseconds."""
        cell_id, self.next_id = self.next_id, self.next_id + 1
        data = code.encode()
        start = time.perf_counter_ns()
        self.channel.sendall(b"execute %d %d\n" % (cell_id, len(data)) + data)
        while True:
            frame = self.read_frame()
            if b'"type":"done"' in frame:
                break
        elapsed = (time.perf_counter_ns() - start) / 1e6
        self.drain()
        if b'"status":"ok"' not in frame:
            raise RuntimeError("cell %r failed: %s" % (code, frame.decode()))
        return elapsed

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.channel.close()
        os.close(self.output)


def perf_block(pid, run):
    """Runs run() under `perf stat -p pid`; returns {event: count}, or {}
    without perf."""
    if shutil.which("perf") is None:
        run()
        return {}
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(PERF_EVENTS), "-p", str(pid)],
                            stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)   # perf attached before the first cell
    run()
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate()
    counts = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in PERF_EVENTS:
            try:
                counts[fields[2]] = float(fields[0])
            except ValueError:      # <not supported>, <not counted>
                pass
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="the first kernel's warden_kernel.py")
    parser.add_argument("--b", required=True, help="the second kernel's warden_kernel.py")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cells", type=int, default=500, help="cells per code per block")
    parser.add_argument("--warmup", type=int, default=200, help="cells per code before measuring")
    parser.add_argument("--warm", default="numpy,pandas", help="WARDEN_WARM, as the default pool has it")
    parser.add_argument("--code", action="append", help="a cell (repeatable); default x=1 and print(1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    codes = args.code or ["x=1", "print(1)"]

    kernels = {"a": Kernel(args.a, args.warm), "b": Kernel(args.b, args.warm)}
    try:
        for kernel in kernels.values():
            for _ in range(args.warmup):
                for code in codes:
                    kernel.cell(code)
        times = {(name, code): [] for name in kernels for code in codes}
        per_cell = {name: {} for name in kernels}
        for _ in range(args.rounds):
            names = list(kernels)
            random.shuffle(names)
            for name in names:
                kernel = kernels[name]

                def block():
                    for _ in range(args.cells):
                        for code in codes:
                            times[(name, code)].append(kernel.cell(code))

                counts = perf_block(kernel.proc.pid, block)
                for event, count in counts.items():
                    if event == "task-clock":
                        count *= 1000          # ms -> us
                    per_cell[name].setdefault(PERF_EVENTS[event], []).append(count / (args.cells * len(codes)))
    finally:
        for kernel in kernels.values():
            kernel.close()

    out = {"a": args.a, "b": args.b, "warm": args.warm, "rounds": args.rounds, "cells": args.cells,
           "round_trip": {name: {code: bench_stats.summarize(times[(name, code)]) for code in codes}
                          for name in kernels},
           "per_cell_median_of_blocks": {name: {k: bench_stats.median(v) for k, v in figures.items()}
                                         for name, figures in per_cell.items()}}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name in kernels:
        print("%s: %s" % (name, getattr(args, name)))
        for code in codes:
            s = out["round_trip"][name][code]
            print("  %-12s n=%d p50 %.3f ms  p90 %.3f  p99 %.3f  mean %.3f" % (
                code, s["n"], s["p50_ms"], s["p90_ms"], s["p99_ms"], s["mean_ms"]))
        figures = out["per_cell_median_of_blocks"][name]
        if figures:
            print("  per cell (kernel process, median of blocks): " +
                  ", ".join("%s %.2f" % item for item in sorted(figures.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
