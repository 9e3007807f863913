# Hunts for a host secret. The token comes on stdin (so it is not in this
# process's argv or environment). Reports which well-known secret places
# exist, then reads every file it can outside /usr (the host's, bound on
# purpose) and /proc, plus a few /proc files that show host state, looking
# for the token in names and contents. Never prints the token.
import os
import sys

token = sys.stdin.read().strip().encode()
assert len(token) >= 16

places = ["/root", "/var", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers",
          "/etc/ssh", "/run", "/mnt", "/srv", "/opt", "/boot", "/sys", "/proc/1/root"]
print("present:", " ".join(p for p in places if os.path.lexists(p)) or "none")

found, scanned = [], 0
def check(path):
    global scanned
    if token in path.encode():
        found.append(path)
    try:
        with open(path, "rb") as f:
            data = f.read(4 << 20)
    except OSError:
        return
    scanned += 1
    if token in data:
        found.append(path)

for top in os.listdir("/"):
    if top in ("usr", "proc", "sys") or os.path.islink("/" + top):
        continue  # /lib, /bin, ... are links into /usr
    for root, dirs, files in os.walk("/" + top):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.isfile(path) or token in name.encode():
                check(path)
for path in ["/proc/mounts", "/proc/self/mountinfo", "/proc/cmdline", "/proc/1/environ",
             "/proc/1/cmdline"]:
    check(path)
print("scanned at least 10 files:", scanned >= 10)
print("found:", " ".join(found) or "nothing")
