"""Small helpers shared by the Python side of the benchmarks: latency
summaries (the same fields as bench_util.cc's Summarize) and memory
measured as PSS from /proc/PID/smaps_rollup, so that copy-on-write pages
shared between processes are split among them instead of counted in full
for each."""

import os


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else float("nan")


def summarize(ms):
    """n, p50, p90, p99, mean, min, max of samples in milliseconds (nearest
    rank, as in bench_util.cc)."""
    ms = sorted(ms)
    out = {"n": len(ms)}
    if not ms:
        return out

    def pct(p):
        rank = max(1, -(-int(p * len(ms) * 1000000) // 1000000))
        return ms[min(len(ms), rank) - 1]

    out.update(p50_ms=pct(0.50), p90_ms=pct(0.90), p99_ms=pct(0.99),
               mean_ms=sum(ms) / len(ms), min_ms=ms[0], max_ms=ms[-1])
    return out


def pss_kib(pid):
    """PSS of one process in KiB, 0 when it is gone."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def process_table():
    """{pid: (ppid, comm)} for every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # comm may hold spaces and parentheses: split at the last ')'.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        table[int(entry)] = (ppid, comm)
    return table


def descendants(root, table=None):
    """Every process below root (not root itself)."""
    table = table or process_table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def tree_pss_kib(root):
    """PSS of root and everything below it."""
    return pss_kib(root) + sum(pss_kib(p) for p in descendants(root))
