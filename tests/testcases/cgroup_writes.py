# Run with a cgroup directory bound writable at /cg: the executor's subtree,
# which holds this sandbox's own group beside its neighbours' (an operator's
# mistake, or a kernel bug that hands a sandbox a cgroup file). Tries every
# write that would lift a limit or reach another sandbox - move itself out
# of its group (cgroup.procs), raise its limits (memory, pids, cpu), enable
# controllers, make a group, kill the neighbours (cgroup.kill), ask for a
# release agent (v1's notify_on_release) - and then opens every file there
# for writing. Prints what succeeded (nothing, if the kernel refuses the
# sandbox's unprivileged host uid), then allocates past its memory limit,
# which must still hold.
import errno
import os

done, errors = [], set()


def attempt(what, f):
    try:
        f()
        done.append(what)
    except OSError as e:
        errors.add(errno.errorcode[e.errno])


def write(path, value):
    def f():
        with open(path, "w") as out:
            out.write(value)
    return f


groups = ["/cg"] + [os.path.join(root, d) for root, dirs, _ in os.walk("/cg") for d in dirs]
attempt("/cg/cgroup.procs", write("/cg/cgroup.procs", str(os.getpid())))
for g in groups:
    for name, value in [("cgroup.procs", str(os.getpid())), ("memory.max", "max"),
                        ("memory.limit_in_bytes", "-1"), ("memory.memsw.limit_in_bytes", "-1"),
                        ("pids.max", "max"), ("cpu.max", "max"), ("cpu.cfs_quota_us", "-1"),
                        ("cgroup.subtree_control", "+memory"), ("cgroup.kill", "1"),
                        ("notify_on_release", "1"), ("release_agent", "/bin/sh")]:
        if os.path.exists(os.path.join(g, name)):
            attempt(os.path.join(g, name), write(os.path.join(g, name), value))
    attempt(g + "/escape", lambda: os.mkdir(g + "/escape"))
writable = set()
for root, _, files in os.walk("/cg"):
    for name in files:
        try:
            os.close(os.open(os.path.join(root, name), os.O_WRONLY))
            writable.add(name)
        except OSError as e:
            errors.add(errno.errorcode[e.errno])
print("groups:", len(groups))
print("done:", " ".join(done) or "nothing")
print("errors:", " ".join(sorted(errors)))
# cgroup v1's memory.cgroup.event_control is writable by all by design: it
# takes eventfd registrations, not settings.
print("writable:", " ".join(sorted(writable - {"cgroup.event_control"})) or "nothing", flush=True)
x = bytearray(256 << 20)
print("allocated past the memory limit")
