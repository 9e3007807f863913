# tests/host/guest.sh, the CPU weight: reads two sandboxes' spinners.py
# outputs and prints the second's share of the CPU time both used while both
# ran (the middle of their common window), and their total as a fraction of
# that window.   python3 cpu_share.py A.out B.out
import sys


def samples(path):
    out = []
    for line in open(path):
        parts = line.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            out.append((int(parts[0]), int(parts[1])))
    return out


def at(series, t):
    # CPU at time t, by linear interpolation between samples.
    for (t0, c0), (t1, c1) in zip(series, series[1:]):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1)
    raise SystemExit(f"no sample around {t}")


a, b = samples(sys.argv[1]), samples(sys.argv[2])
if len(a) < 5 or len(b) < 5:
    raise SystemExit(f"too few samples: {len(a)}, {len(b)}")
start, end = max(a[0][0], b[0][0]), min(a[-1][0], b[-1][0])
margin = (end - start) // 5
start, end = start + margin, end - margin
if end - start < 2_000_000_000:
    raise SystemExit(f"the two ran together for only {(end - start) / 1e9:.1f} s")
da, db = at(a, end) - at(a, start), at(b, end) - at(b, start)
print(f"{db / (da + db):.3f} {(da + db) / (end - start):.3f} {(end - start) / 1e9:.1f}")
