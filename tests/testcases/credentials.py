# Prints its identity, capability sets, no_new_privs and seccomp mode as the
# kernel reports them in /proc/self/status.
with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
for key in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
            "NoNewPrivs", "Seccomp"):
    print(key, " ".join(status[key].split()))
