# Run in a sandbox by tests/host/guest.sh (the CPU weight): pins itself to
# CPU 0, forks N busy processes there, and prints "t cpu" every 0.2 s for
# SECONDS: the monotonic clock (shared by every sandbox: there is no time
# namespace) and the CPU time of the busy processes so far, in ns.
#   python3 spinners.py N SECONDS
import os
import sys
import time

n, seconds = int(sys.argv[1]), float(sys.argv[2])
os.sched_setaffinity(0, {0})
tick = os.sysconf("SC_CLK_TCK")
kids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    kids.append(pid)


def cpu_ns():
    total = 0
    for pid in kids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total * 1_000_000_000 // tick


end = time.monotonic() + seconds
while time.monotonic() < end:
    print(time.monotonic_ns(), cpu_ns(), flush=True)
    time.sleep(0.2)
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
