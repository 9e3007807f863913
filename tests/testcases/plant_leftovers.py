# Leaves things behind for the next run to find: files in /tmp, /dev/shm and
# /workspace, a SysV shared memory segment and a semaphore set.
import ctypes
import ctypes.util

for d in ("/tmp", "/dev/shm", "/workspace"):
    with open(f"{d}/warden-leftover", "w") as f:
        f.write("left behind\n")
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
IPC_CREAT = 0o1000
assert libc.shmget(0x5741524E, 4096, IPC_CREAT | 0o666) >= 0
assert libc.semget(0x5741524E, 1, IPC_CREAT | 0o666) >= 0
print("planted")
