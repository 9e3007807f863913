"""Where an idle Python session's memory goes, page by page.

    /usr/bin/python3 bench/idle_memory.py [--bin-dir build/bin] [--sessions 20]
        [--detail 6] [--json]

Starts a wardend on a socket of its own (bench/run_bench.py's Daemon, the
pools of deploy/wardend.json), measures the PSS of everything under it the
way `run_bench.py --sections memory` does (the growth with N idle sessions
open, divided by N), and then attributes each session's pages exactly:
every resident page of a session's processes (its init and its kernel) is
looked up by physical frame (/proc/PID/pagemap, root only) and counted as
the session's own when the zygote does not map the same frame. Own pages
are grouped by the mapping they sit in (the heap, anonymous memory the
clone inherited from the zygote - CPython's arenas, numpy's and pandas'
data -, new mappings, stacks, files), and split into those only the init,
only the kernel, or both map, and those that other sessions map too (a page
the zygote wrote after cloning leaves its old copy to the clones made
before). Page tables (VmPTE) are listed beside it: PSS does not count them.
Figures only; it asserts nothing.
"""

import argparse
import collections
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_stats  # noqa: E402
from run_bench import Daemon  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
PFN_MASK = (1 << 55) - 1
PRESENT = 1 << 63


def mappings(pid):
    """[(start, end, path)] of a process, path '' for anonymous memory."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append((start, end, parts[5].strip() if len(parts) > 5 else ""))
    return out


def frames(pid):
    """{pfn: (start of its mapping, mapping index)} of every resident page."""
    maps = mappings(pid)
    out = {}
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        for index, (start, end, path) in enumerate(maps):
            if path == "[vsyscall]":
                continue
            f.seek(start // PAGE * 8)
            data = f.read((end - start) // PAGE * 8)
            for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
                if entry & PRESENT:
                    pfn = entry & PFN_MASK
                    if pfn:
                        out[pfn] = (start + i * PAGE, index)
    return maps, out


def category(maps, index, zygote_starts):
    """A readable name for the mapping a page sits in."""
    start, end, path = maps[index]
    if path.startswith("["):
        return path
    if path:
        name = os.path.basename(path.split(" (deleted)")[0])
        if "/numpy/" in path:
            return "file: numpy extension modules"
        if "/pandas/" in path:
            return "file: pandas extension modules"
        if name.startswith("libpython"):
            return "file: libpython"
        return "file: " + ("other .so" if ".so" in name else name)
    # Anonymous: the .bss of the file mapped just below it, or memory the
    # clone inherited from the zygote (same address), or new.
    if index > 0 and maps[index - 1][1] == start and maps[index - 1][2]:
        below = maps[index - 1][2]
        if "libpython" in below:
            return "anon: libpython .bss"
        return "anon: .bss of " + os.path.basename(below)
    size = end - start
    where = "inherited from the zygote" if start in zygote_starts else "new in the clone"
    if size == 1 << 20:
        return "anon 1 MiB (CPython arenas), %s" % where
    return "anon, %s" % where


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def python_units(daemon_pid):
    """(zygote pid, [(init pid, kernel pid)]) below wardend."""
    table = bench_stats.process_table()
    zygote, sessions = None, []
    for pid, (ppid, comm) in table.items():
        if ppid != daemon_pid or "python" not in comm:
            continue
        children = [p for p, (pp, _) in table.items() if pp == pid]
        if not children:
            zygote = pid
        elif len(children) == 1:
            sessions.append((pid, children[0]))
    return zygote, sorted(sessions)


def attribute(daemon_pid, detail):
    zygote, units = python_units(daemon_pid)
    zmaps, zframes = frames(zygote)
    zset = set(zframes)
    zstarts = {m[0] for m in zmaps if not m[2]}
    # The oldest `detail` sessions (pids grow; the pool's spares are newest).
    chosen = units[:detail]
    per_unit = []
    for init, kernel in chosen:
        imaps, iframes = frames(init)
        kmaps, kframes = frames(kernel)
        per_unit.append((init, kernel, imaps, iframes, kmaps, kframes))
    owners = collections.Counter()
    for _, _, _, iframes, _, kframes in per_unit:
        for pfn in set(iframes) | set(kframes):
            if pfn not in zset:
                owners[pfn] += 1
    table = collections.defaultdict(lambda: collections.Counter())
    extra = collections.Counter()
    for init, kernel, imaps, iframes, kmaps, kframes in per_unit:
        for pfn in set(iframes) | set(kframes):
            if pfn in zset:
                continue
            in_i, in_k = pfn in iframes, pfn in kframes
            maps, (addr, index) = (kmaps, kframes[pfn]) if in_k else (imaps, iframes[pfn])
            name = category(maps, index, zstarts)
            who = "shared with other sessions" if owners[pfn] > 1 else \
                "init and kernel" if in_i and in_k else "kernel only" if in_k else "init only"
            table[name][who] += 1
        extra["init VmPTE KiB"] += status_kib(init, "VmPTE")
        extra["kernel VmPTE KiB"] += status_kib(kernel, "VmPTE")
        extra["init Pss KiB"] += bench_stats.pss_kib(init)
        extra["kernel Pss KiB"] += bench_stats.pss_kib(kernel)
    n = max(1, len(per_unit))
    kib = PAGE // 1024
    rows = []
    for name, counter in table.items():
        row = {"mapping": name, "total_kib": sum(counter.values()) * kib / n}
        row.update({k: v * kib / n for k, v in counter.items()})
        rows.append(row)
    rows.sort(key=lambda r: -r["total_kib"])
    return {"sessions_analysed": len(per_unit), "zygote_pid": zygote, "zygote_resident_kib": len(zset) * kib,
            "zygote_pss_kib": bench_stats.pss_kib(zygote), "zygote_vmpte_kib": status_kib(zygote, "VmPTE"),
            "per_session": rows, "per_session_other": {k: v / n for k, v in extra.items()}}


def tree_total(daemon_pid):
    table = bench_stats.process_table()
    pids = [daemon_pid] + bench_stats.descendants(daemon_pid, table)
    return {"total_kib": sum(bench_stats.pss_kib(p) for p in pids), "daemon_kib": bench_stats.pss_kib(daemon_pid)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default=str(HERE.parent / "build" / "bin"))
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--detail", type=int, default=6)
    ap.add_argument("--kernels-dir", default="", help="kernels_dir for wardend (default: its own)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bin_dir = pathlib.Path(args.bin_dir).resolve()
    work = tempfile.TemporaryDirectory(prefix="warden-idlemem-")
    daemon = Daemon(bin_dir, work.name, "idlemem")
    if args.kernels_dir:
        daemon.config["kernels_dir"] = args.kernels_dir
        daemon.config_path.write_text(json.dumps(daemon.config, indent=2))
    out = {"loadavg": open("/proc/loadavg").read().split()[:3]}
    hold = None
    try:
        daemon.start()
        daemon.wait_pools_full()
        time.sleep(0.5)
        before = tree_total(daemon.proc.pid)
        hold = subprocess.Popen([str(bin_dir / "warden_bench"), "hold", "--addr", daemon.addr, "--max",
                                 str(args.sessions), "--seconds", "120", "--min-avail-mb", "4096"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        opened = json.loads(hold.stdout.readline())
        daemon.wait_pools_full()
        time.sleep(0.5)
        after = tree_total(daemon.proc.pid)
        held = max(1, opened["held"])
        out["held"] = opened["held"]
        out["idle_session_pss_mib"] = (after["total_kib"] - before["total_kib"]) / held / 1024
        out["daemon_growth_per_session_kib"] = (after["daemon_kib"] - before["daemon_kib"]) / held
        out.update(attribute(daemon.proc.pid, args.detail))
    finally:
        if hold is not None and hold.poll() is None:
            hold.stdin.close()
            try:
                hold.wait(timeout=120)
            except subprocess.TimeoutExpired:
                hold.kill()
        daemon.stop()
        work.cleanup()
    if args.json:
        print(json.dumps(out))
        return
    print("load average %s; %d sessions held; idle session PSS (growth / N) %.2f MiB; "
          "wardend's own growth %.1f KiB per session" % (
              " ".join(out["loadavg"]), out["held"], out["idle_session_pss_mib"],
              out["daemon_growth_per_session_kib"]))
    print("zygote: %d KiB resident, %d KiB PSS, %d KiB page tables" % (
        out["zygote_resident_kib"], out["zygote_pss_kib"], out["zygote_vmpte_kib"]))
    print("a session's own pages (not mapped by the zygote), KiB, mean of %d sessions:" %
          out["sessions_analysed"])
    cols = ["kernel only", "init only", "init and kernel", "shared with other sessions"]
    print("  %-55s %8s %s" % ("mapping", "total", " ".join("%12s" % c[:12] for c in cols)))
    for row in out["per_session"]:
        print("  %-55s %8.0f %s" % (row["mapping"], row["total_kib"],
                                   " ".join("%12.0f" % row.get(c, 0) for c in cols)))
    print("  %-55s %8.0f" % ("all", sum(r["total_kib"] for r in out["per_session"])))
    for k, v in out["per_session_other"].items():
        print("  %s: %.0f" % (k, v))


if __name__ == "__main__":
    main()
