"""The Jupyter anchor: Debian's ipykernel driven through jupyter_client, the
way a notebook server or an agent framework's Jupyter executor drives it.

Run with Debian's /usr/bin/python3 (python3-ipykernel, python3-jupyter-client);
prints one JSON object:

    /usr/bin/python3 bench/jupyter_anchor.py latency --n 2000
    /usr/bin/python3 bench/jupyter_anchor.py start --n 5
    /usr/bin/python3 bench/jupyter_anchor.py memory --kernels 4
    /usr/bin/python3 bench/jupyter_anchor.py throughput --kernels 4 --seconds 5
    /usr/bin/python3 bench/jupyter_anchor.py noisy --seconds 5 --burners 2

A cell's round trip is execute_request on the shell channel until the
kernel's `idle` status for that request on IOPub, as execute_interactive()
does it. Figures only.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_stats  # noqa: E402

from jupyter_client import BlockingKernelClient, KernelManager  # noqa: E402

TIMEOUT_S = 60


def start_kernel():
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT_S)
    return km, kc


def stop_kernel(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run_cell(kc, code):
    """Sends one cell and waits for the kernel to go idle after it; returns
    True when it finished without an error."""
    msg_id = kc.execute(code, store_history=False)
    ok = True
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT_S)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            ok = False
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=TIMEOUT_S)
    return ok and reply["content"]["status"] == "ok"


def latency(args):
    km, kc = start_kernel()
    try:
        for _ in range(args.warmup):
            run_cell(kc, args.code)
        samples, failures = [], 0
        for _ in range(args.n):
            t = time.perf_counter()
            failures += not run_cell(kc, args.code)
            samples.append((time.perf_counter() - t) * 1000)
    finally:
        stop_kernel(km, kc)
    out = bench_stats.summarize(samples)
    out["failures"] = failures
    return out


def start(args):
    """Kernel start until ready, and until its first cell has answered."""
    ready, first_cell = [], []
    for _ in range(args.n):
        t = time.perf_counter()
        km, kc = start_kernel()
        ready.append((time.perf_counter() - t) * 1000)
        run_cell(kc, "x=1")
        first_cell.append((time.perf_counter() - t) * 1000)
        stop_kernel(km, kc)
    return {"ready": bench_stats.summarize(ready), "first_cell": bench_stats.summarize(first_cell),
            "per_second_sequential": 1000.0 / bench_stats.median(first_cell)}


def memory(args):
    """PSS of idle kernels, each having run one cell, with `kernels` open."""
    kernels = [start_kernel() for _ in range(args.kernels)]
    try:
        for _, kc in kernels:
            run_cell(kc, "x=1")
        time.sleep(0.5)
        pss = [bench_stats.tree_pss_kib(km.provisioner.pid) for km, _ in kernels]
    finally:
        for km, kc in kernels:
            stop_kernel(km, kc)
    return {"kernels": args.kernels, "pss_mib": [round(p / 1024, 1) for p in pss],
            "pss_mib_median": bench_stats.median(pss) / 1024}


def _throughput_worker(connection_info, code, seconds, start_at, queue):
    kc = BlockingKernelClient()
    kc.load_connection_info(connection_info)
    kc.start_channels()
    while time.time() < start_at:
        time.sleep(0.001)
    n, end = 0, start_at + seconds
    while time.time() < end:
        run_cell(kc, code)
        n += 1
    kc.stop_channels()
    queue.put(n)


def throughput(args):
    """Cells per second across `kernels` kernels, one client process each."""
    kernels = [start_kernel() for _ in range(args.kernels)]
    try:
        for _, kc in kernels:
            run_cell(kc, "x=1")
            kc.stop_channels()
        queue = multiprocessing.Queue()
        start_at = time.time() + 1.0
        procs = [multiprocessing.Process(target=_throughput_worker,
                                         args=(km.get_connection_info(), args.code, args.seconds,
                                               start_at, queue))
                 for km, _ in kernels]
        for p in procs:
            p.start()
        total = sum(queue.get(timeout=args.seconds + TIMEOUT_S) for _ in procs)
        for p in procs:
            p.join()
    finally:
        for km, kc in kernels:
            km.shutdown_kernel(now=True)
    return {"kernels": args.kernels, "seconds": args.seconds, "ok": total,
            "per_second": total / args.seconds}


def noisy(args):
    """A victim kernel's cells for `seconds` alone, then as long while
    `burners` other kernels spin the CPU (Jupyter has no limits to hold a fork bomb or a memory hog, so
    those are not run against it)."""
    km, kc = start_kernel()
    burners = [start_kernel() for _ in range(args.burners)]
    try:
        def measure():
            samples, end = [], time.monotonic() + args.seconds
            while time.monotonic() < end or len(samples) < 50:
                t = time.perf_counter()
                run_cell(kc, "x=1")
                samples.append((time.perf_counter() - t) * 1000)
                time.sleep(0.002)
            return samples
        for _ in range(100):
            run_cell(kc, "x=1")
        quiet = measure()
        for _, bc in burners:
            bc.execute("while True:\n    pass\n")
        time.sleep(1.0)
        abused = measure()
    finally:
        for bkm, bc in burners:
            bkm.interrupt_kernel()
            stop_kernel(bkm, bc)
        stop_kernel(km, kc)
    return {"quiet": bench_stats.summarize(quiet), "abused": bench_stats.summarize(abused),
            "burners": args.burners}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["latency", "start", "memory", "throughput", "noisy"])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--code", default="x=1")
    parser.add_argument("--kernels", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--burners", type=int, default=2)
    args = parser.parse_args()
    result = globals()[args.command](args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
