#!/usr/bin/python3
"""How long `pip install` takes inside a sandbox: Warden's pip
(kernel/bin/warden_pip.py) beside Debian's (`python3 -m pip`), for an
install from a wheelhouse, "Requirement already satisfied", and a package
that is in no wheelhouse. Figures only, never pass/fail (docs/runtime.md).

Builds a wheelhouse (a package with one dependency), then runs everything
in one sandbox through warden-run with the binds and environment a pool
with a wheelhouse gives its sandboxes. Each figure is the median of
--repeat runs: wall milliseconds, and the CPU milliseconds the command used
(the wall clock on a busy host says more about the host). Needs root:

    /usr/bin/python3 bench/pip_bench.py [--bin-dir build/bin] [--repeat 5]
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "kernel" / "testing"))

from wheels import build_wheel, pip_environment  # noqa: E402

# Runs inside the sandbox: each case `repeat` times, printing JSON.
INSIDE = r"""
import json, os, resource, shutil, statistics, subprocess, sys, time
# warden-run --env adds to its default PATH rather than replacing it.
os.environ["PATH"] = "/opt/warden/bin:/usr/local/bin:/usr/bin:/bin"
repeat = int(sys.argv[1])
site = "/workspace/.local"
cases = [
    ("install from the wheelhouse", ["pip", "install", "benchpkg"], True),
    ("already satisfied", ["pip", "install", "benchpkg"], False),
    ("already satisfied (system numpy)", ["pip", "install", "numpy"], False),
    ("not in the wheelhouse", ["pip", "install", "nosuchpkg"], False),
]
figures = {}
for tool, prefix in (("warden pip", []), ("Debian pip", ["python3", "-m"])):
    for name, argv, fresh in cases:
        walls, cpus = [], []
        for _ in range(repeat):
            if fresh:
                shutil.rmtree(site, ignore_errors=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(prefix + argv, capture_output=True)
            walls.append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
            if done.returncode != (1 if "not in" in name else 0):
                sys.exit("%s %s failed: %s" % (tool, name, done.stderr.decode()))
        figures["%s: %s" % (tool, name)] = (statistics.median(walls), statistics.median(cpus))
print(json.dumps(figures))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="warden-pip-bench-") as tmp:
        wheelhouse = pathlib.Path(tmp) / "wheelhouse"
        build_wheel(str(wheelhouse), "benchpkg", "1.0", init="VALUE = 1\n", requires=["benchdep"])
        build_wheel(str(wheelhouse), "benchdep", "1.0")
        pathlib.Path(tmp).chmod(0o755)
        wheelhouse.chmod(0o755)
        env = ["HOME=/workspace", "XDG_CACHE_HOME=/tmp/.cache"] + [
            "%s=%s" % item for item in pip_environment("/workspace/.local", "/opt/warden/wheelhouse").items()]
        command = [str(pathlib.Path(args.bin_dir) / "warden-run"), "--json", "--cpu-ms", "300000",
                   "--wall-ms", "600000", "--bind", "%s:/opt/warden/bin" % (REPO / "kernel" / "bin"),
                   "--bind", "%s:/opt/warden/wheelhouse" % wheelhouse]
        for setting in env:
            command += ["--env", setting]
        command += ["--", "/usr/bin/python3", "-c", INSIDE, str(args.repeat)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit("warden-run failed: %s" % done.stderr)
        result = json.loads(done.stdout)
        if result["outcome"] != "OK":
            sys.exit("the benchmark failed inside the sandbox: %s %s" % (result["outcome"], result["stderr"]))
        figures = json.loads(result["stdout"])
    print("pip inside a sandbox, median of %d (ms)" % args.repeat)
    print("%-52s %8s %8s" % ("", "wall", "CPU"))
    for name, (wall, cpu) in figures.items():
        print("%-52s %8.0f %8.0f" % (name, wall, cpu))


if __name__ == "__main__":
    main()
