# Looks for sysfs and cgroupfs: mounted anywhere, its own cgroup's path, and
# any cgroup control file reachable outside /usr and /proc.
import os

print("/sys exists:", os.path.exists("/sys"))
with open("/proc/self/mounts") as f:
    kinds = [line.split()[2] for line in f]
print("sysfs or cgroup mounts:", sum(k in ("sysfs", "cgroup", "cgroup2") for k in kinds))
with open("/proc/self/cgroup") as f:
    print("own cgroup paths:", " ".join(sorted({line.rstrip("\n").split(":", 2)[2] for line in f})))
controls = []
for top in os.listdir("/"):
    if top in ("usr", "proc") or os.path.islink("/" + top):
        continue  # /usr holds the host's runtimes; /lib, /bin, ... link into it
    for root, dirs, files in os.walk("/" + top):
        controls += [os.path.join(root, n) for n in files
                     if n.startswith(("memory.", "pids.", "cpu.", "cgroup.", "release_agent"))]
print("cgroup control files:", " ".join(controls) or "none")
