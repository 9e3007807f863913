"""Which steps of a Python kernel's start dirty pages it shares with the zygote.

    /usr/bin/python3 bench/clone_dirty_pages.py [--rehearse N]

Loads kernel/python/warden_kernel.py the way warden-python-zygote does
(numpy and pandas warm, the snapshot code, gc.freeze()), forks, and in the
child runs the steps of the kernel's main() one by one, printing after each
how many KiB the child maps alone (Private_Clean + Private_Dirty of
/proc/self/smaps_rollup): each is a page the step wrote that was shared with
the parent. --rehearse N runs the start-up path N times in the parent
before the fork, to see how much of it is one-time work (caches, the 3.11
interpreter's specialisation of bytecode) the zygote could do for every
clone. The first two "noop" marks measure the probe itself. Figures only.
"""

import argparse
import gc
import os
import socket
import sys
import types

KDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernel", "python") + "/"


def private_kib():
    d = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Private_Clean", "Private_Dirty"):
                d[k] = int(v.split()[0])
    return d["Private_Clean"] + d["Private_Dirty"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rehearse", type=int, default=0)
    args = ap.parse_args()
    module = types.ModuleType("_warden_kernel")
    module.__file__ = "/warden/kernels/warden_kernel.py"
    with open(KDIR + "warden_kernel.py", "rb") as f:
        code = compile(f.read(), module.__file__, "exec")
    sys.modules["_warden_kernel"] = module
    exec(code, module.__dict__)
    module.warm_imports("numpy,pandas")
    module.load_snapshots(KDIR + "warden_snapshot.py", "/warden/kernels/warden_snapshot.py")
    import numpy
    K = module
    saved = (list(sys.path), sys.modules["__main__"], sys.stdout, sys.stderr, sys.stdin,
             dict(sys.path_importer_cache))
    for _ in range(args.rehearse):
        K.refresh_imports()
        r, w = os.pipe()
        ch = K.Channel(w)
        K.Kernel(ch)
        ch.send({"type": "ready", "language": "python", "version": "x", "warm": ["numpy"], "warm_errors": {}})
        os.read(r, 65536)
        os.close(r)
        os.close(w)
        K.warm_imports("numpy,pandas")
        numpy.random.seed()
    sys.path[:] = saved[0]
    sys.modules["__main__"] = saved[1]
    sys.stdout, sys.stderr, sys.stdin = saved[2:5]
    sys.path_importer_cache.clear()
    sys.path_importer_cache.update(saved[5])
    gc.collect()
    gc.freeze()
    a, b = socket.socketpair()
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    marks = []

    def mark(name):
        marks.append((name, private_kib()))

    mark("fork")
    mark("noop")
    mark("noop")
    numpy.random.seed()
    mark("numpy.random.seed()")
    fd = b.fileno()
    os.set_inheritable(fd, False)
    import signal
    signal.signal(signal.SIGINT, K._on_sigint)
    os.register_at_fork(after_in_child=K._after_fork_in_child)
    sys.path.insert(0, "")
    K.refresh_imports()
    mark("refresh_imports()")
    sys.meta_path.insert(0, K._PyplotHook())
    import builtins
    builtins.display = K.display
    ch = K.Channel(fd)
    mark("Channel()")
    K.KERNEL = K.Kernel(ch)
    mark("Kernel()")
    import faulthandler
    faulthandler.enable(file=K.KERNEL.stderr)
    mark("faulthandler.enable()")
    warm, errors = K.warm_imports("numpy,pandas")
    mark("warm_imports()")
    K.KERNEL.restore_stdio()
    ch.send({"type": "ready", "language": "python", "version": "x", "warm": warm, "warm_errors": errors})
    mark("the ready frame")
    previous = 0
    for name, kib in marks:
        sys.__stderr__.write("%-24s %6d KiB private (+%d)\n" % (name, kib, kib - previous))
        previous = kib
    os._exit(0)


if __name__ == "__main__":
    main()
