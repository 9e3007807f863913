"""The fleet's figures (docs/fleet.md, docs/benchmarks.md), on this machine:
warden-gateway in front of three wardend nodes on loopback with mutual TLS
between them (tests/fleet/fleet_local_test.py's fleet), printed as JSON.

  /usr/bin/python3 bench/fleet_bench.py --bin-dir build/bin [--burst 1000] [--drain 100] [--cells 2000]
      [--partitions 3] [--settle-s 10] [--sections routing,node_loss,partition,drain,burst]

- routing: a warm session's `x=1` round trip through the gateway against
  the same straight to its node (the gateway's added latency, p50);
- burst: N concurrent E2B `Sandbox.create` then a first command, through the
  gateway's E2B endpoint with the unmodified SDK (ComputeSDK's "time to
  interactive"): median, p99 and failures, beside E2B's and Daytona's
  published figures for a burst of 100 (a burst of 100 runs too, as
  `burst_100`, when N is larger);
- drain: a node holding N idle Python sessions gets SIGTERM while every
  session is called through the gateway: when the last answered, with its
  state, from another node;
- node loss: a node killed (SIGKILL): when the gateway had noticed, and
  when a new session was placed elsewhere;
- partition: a node stopped (SIGSTOP, nothing refused): the gateway's own
  decision time from the last thing the node said, and when a client saw it.
Each figure carries the 1-minute load average when it was taken.
Never pass/fail: figures only.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "fleet"))

ANCHOR_BURST = 100  # the size of the published bursts
PUBLISHED = {  # ComputeSDK, "time to interactive" for a burst of 100, October 2026
    "e2b_median_ms": 1333,
    "daytona_median_ms": 646,
}


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def routing(fleet, pb, pb_grpc, cells):
    s = fleet.stub.CreateSession(pb.CreateSessionRequest(), metadata=fleet.auth(ALICE), timeout=60)
    node = NODE_OF(s.id)
    with fleet.direct(node) as channel:
        direct = pb_grpc.ExecutorStub(channel)
        forwarded = (("x-warden-tenant", "alice"),)

        def run(stub, metadata, count):
            times = []
            for _ in range(count):
                start = time.perf_counter()
                stub.Execute(pb.ExecuteRequest(session_id=s.id, code="x=1"), metadata=metadata, timeout=30)
                times.append((time.perf_counter() - start) * 1000)
            return times
        run(direct, forwarded, 100)  # warm both connections
        run(fleet.stub, fleet.auth(ALICE), 100)
        # Interleaved rounds, so that load on the machine falls on both alike.
        d, g = [], []
        for _ in range(4):
            d += run(direct, forwarded, cells // 4)
            g += run(fleet.stub, fleet.auth(ALICE), cells // 4)
    return {"cells": len(d), "direct_p50_ms": round(pct(d, 0.5), 3), "direct_p99_ms": round(pct(d, 0.99), 3),
            "gateway_p50_ms": round(pct(g, 0.5), 3), "gateway_p99_ms": round(pct(g, 0.99), 3),
            "added_p50_ms": round(pct(g, 0.5) - pct(d, 0.5), 3)}


def burst(fleet, n, http_port):
    script = HERE.parent / "tests" / "fleet" / "e2b_burst.mjs"
    out = subprocess.run(["node", str(script), str(n)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=1800, env=dict(os.environ, E2B_API_URL="http://127.0.0.1:%d" % http_port,
                                                E2B_SANDBOX_URL="http://127.0.0.1:%d" % http_port,
                                                E2B_API_KEY=ALICE))
    if out.returncode != 0:
        return {"error": out.stdout[-2000:]}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result.update(PUBLISHED)
    return result


def drain(fleet, pb, pb_grpc, n):
    victim = "n1"
    with fleet.direct(victim) as channel:
        stub = pb_grpc.ExecutorStub(channel)
        meta = (("x-warden-tenant", "alice"),)
        sessions = [stub.CreateSession(pb.CreateSessionRequest(), metadata=meta, timeout=120).id for _ in range(n)]
        for i, sid in enumerate(sessions):
            stub.Execute(pb.ExecuteRequest(session_id=sid, code="x = %d" % i), metadata=meta, timeout=60)
    answered = {}
    errors = []

    def call(i, sid):
        r = fleet.stub.Execute(pb.ExecuteRequest(session_id=sid, code="x"), metadata=fleet.auth(ALICE), timeout=120)
        if not r.results or r.results[0].data["text/plain"] != str(i).encode():
            errors.append((sid, r.outcome, r.message))
        answered[sid] = time.monotonic()
    start = time.monotonic()
    fleet.nodes[victim].send_signal(signal.SIGTERM)
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(n, 100)) as pool:
        futures = [pool.submit(call, i, sid) for i, sid in enumerate(sessions)]
        for f in futures:
            try:
                f.result()
            except Exception as e:  # noqa: BLE001 - counted
                errors.append(repr(e)[:200])
    fleet.nodes[victim].wait(timeout=120)
    drained = time.monotonic() - start
    times = [t - start for t in answered.values()]
    fleet.start_node(victim)
    return {"sessions": n, "answered": len(answered), "failures": len(errors), "failure_sample": errors[:3],
            "last_answer_s": round(max(times), 2) if times else None,
            "median_answer_s": round(statistics.median(times), 2) if times else None,
            "node_exited_s": round(drained, 2)}


def loadavg():
    return round(os.getloadavg()[0], 1)


def timed(section, *args):
    """A section's figures with the 1-minute load average before and after it
    (other work shares the machine; the average lags by about a minute)."""
    before = loadavg()
    out = section(*args)
    out["loadavg"] = [before, loadavg()]
    return out


def gateway_downs(fleet):
    """How many times the gateway has counted a node down so far (its log)."""
    return (fleet.tmp / "gateway.log").read_text(errors="replace").count(" is down: ")


def partition(fleet, victim="n3", rounds=3):
    """A node stopped (SIGSTOP: its connections stay open, nothing is
    refused): the gateway's own decision, from the last thing it heard
    from the node to counting it lost, by its clock; and when a client
    asking the gateway saw it."""
    decided, seen = [], []
    for _ in range(rounds):
        fh.wait_until(lambda: fleet.up_nodes() == 3, 120, "three nodes")
        start = time.monotonic()
        fleet.nodes[victim].send_signal(signal.SIGSTOP)
        try:
            lost = fh.wait_until(lambda: fleet.unreachable(victim), 60, "the stopped node noticed", interval=0.02)
            seen.append(time.monotonic() - start)
            decided.append(lost.unreachable_since_unix_ms - lost.last_heard_unix_ms)
        finally:
            fleet.nodes[victim].send_signal(signal.SIGCONT)
    return {"rounds": rounds, "decided_ms": decided, "client_saw_s": [round(t, 2) for t in seen],
            "max_client_saw_s": round(max(seen), 2)}


def node_loss(fleet, pb, victim="n2"):
    start = time.monotonic()
    fleet.nodes[victim].send_signal(signal.SIGKILL)
    fleet.nodes[victim].wait()
    noticed = None
    while time.monotonic() - start < 30:
        if fleet.up_nodes() == 2:
            noticed = time.monotonic() - start
            break
        time.sleep(0.05)
    s = fleet.stub.CreateSession(pb.CreateSessionRequest(), metadata=fleet.auth(ALICE), timeout=60)
    placed = time.monotonic() - start
    fleet.start_node(victim)
    return {"noticed_s": round(noticed, 2) if noticed is not None else None, "new_session_on": NODE_OF(s.id),
            "new_session_placed_s": round(placed, 2)}


def main():
    global ALICE, NODE_OF, fh
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=str(HERE.parent / "build" / "bin"))
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--drain", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3, help="times a node is stopped (SIGSTOP)")
    parser.add_argument("--settle-s", type=float, default=10,
                        help="seconds the nodes' pools get to refill after each burst")
    parser.add_argument("--sections", default="routing,node_loss,partition,drain,burst",
                        help="which to run, comma-separated (all by default)")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    os.environ["WARDEN_BIN_DIR"] = str(pathlib.Path(args.bin_dir).resolve())
    import fleet_harness as fh
    import fleet_local_test as flt
    ALICE, NODE_OF = fh.ALICE, fh.node_of
    out = {}
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        http_port = fh.free_port()
        fleet = flt.Fleet(tmp, http_port=http_port, max_sessions=max(1200, args.burst + 200))
        try:
            if "routing" in sections:
                out["routing"] = timed(routing, fleet, flt.pb, flt.pb_grpc, args.cells)
            if "node_loss" in sections:
                out["node_loss"] = timed(node_loss, fleet, flt.pb)
                fh.wait_until(lambda: fleet.up_nodes() == 3, 120, "three nodes")
            if "partition" in sections:
                out["partition"] = timed(partition, fleet, "n3", args.partitions)
                fh.wait_until(lambda: fleet.up_nodes() == 3, 120, "three nodes")
            if "drain" in sections:
                out["drain"] = timed(drain, fleet, flt.pb, flt.pb_grpc, args.drain)
                fh.wait_until(lambda: fleet.up_nodes() == 3, 120, "three nodes")
            if "burst" in sections:
                downs = gateway_downs(fleet)
                # The anchors' own size first, then the goal's (they differ in a full run).
                for n in sorted({ANCHOR_BURST, args.burst}):
                    out["burst" if n == args.burst else "burst_%d" % n] = timed(burst, fleet, n, http_port)
                    time.sleep(args.settle_s)  # the sandboxes it killed leave the nodes' pools to refill
                # Nodes the gateway took for lost under the bursts' load (none was stopped).
                out["burst"]["nodes_counted_down"] = gateway_downs(fleet) - downs
        finally:
            fleet.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
