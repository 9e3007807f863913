# Tries to change the sandbox's root filesystem, the runtime trees bound
# from the host, and kernel settings under /proc. Prints the errno name of
# each attempt (or "WROTE").
import errno
import os


def attempt(what, fn):
    try:
        fn()
        print(f"{what}: WROTE")
    except OSError as e:
        print(f"{what}: {errno.errorcode[e.errno]}")


def create(path):
    return lambda: open(path, "x").close()


def append(path):
    return lambda: open(path, "a").close()


attempt("create /warden-escape-probe", create("/warden-escape-probe"))
attempt("create /usr/warden-escape-probe", create("/usr/warden-escape-probe"))
attempt("create /usr/lib/warden-escape-probe", create("/usr/lib/warden-escape-probe"))
attempt("create /etc/warden-escape-probe", create("/etc/warden-escape-probe"))
attempt("append /etc/passwd", append("/etc/passwd"))
attempt("append /etc/ld.so.cache", append("/etc/ld.so.cache"))
attempt("append /usr/bin/env", append("/usr/bin/env"))
attempt("chmod /usr/bin/env", lambda: os.chmod("/usr/bin/env", 0o4777))
attempt("rename /etc/hosts", lambda: os.rename("/etc/hosts", "/etc/hosts.old"))
attempt("mkdir /warden-escape-probe", lambda: os.mkdir("/warden-escape-probe"))
attempt("symlink /bin/warden-escape-probe",
        lambda: os.symlink("/tmp", "/bin/warden-escape-probe"))
attempt("append /proc/sys/kernel/hostname", append("/proc/sys/kernel/hostname"))
attempt("append /proc/sys/kernel/core_pattern", append("/proc/sys/kernel/core_pattern"))
attempt("append /proc/self/root/usr/bin/env", append("/proc/self/root/usr/bin/env"))
