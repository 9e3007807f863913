# Looks at /proc for other processes: starts a child, then prints the pids it
# can see, whether the sandbox's init (pid 1) or the host pids given as
# arguments are visible, what signalling pid 1 does, and how many file locks
# /proc/locks shows (the host test holds one).
import errno
import os
import signal
import sys

child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)

print("pids:", " ".join(sorted((e for e in os.listdir("/proc") if e.isdigit()), key=int)))
print("pid 1 visible:", os.path.exists("/proc/1"))
for host_pid in sys.argv[1:]:
    print(f"host pid {host_pid} visible:", os.path.exists(f"/proc/{host_pid}"))
try:
    os.kill(1, 0)
    print("kill(1, 0): allowed")
except OSError as e:
    print("kill(1, 0):", errno.errorcode[e.errno])
with open("/proc/locks") as f:
    print("locks:", len(f.read().splitlines()))
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
