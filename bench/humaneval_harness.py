"""The anchor for HumanEval: openai/human-eval's own harness approach
(human_eval/execution.py, MIT licence), reproduced here because it is not
packaged for Debian: for each sample, a multiprocessing.Manager list for the
result and a multiprocessing.Process that makes a temporary directory,
disables destructive os/shutil functions ("reliability_guard"), swallows
stdio and exec()s the program under a setitimer time limit (3 s); four
samples at a time from a ThreadPoolExecutor, as evaluate_functional_correctness
runs them. It is not a sandbox (its docstring says so); it is what people
run HumanEval with.

    /usr/bin/python3 bench/humaneval_harness.py PROGRAMS.jsonl [--workers 4]

prints one JSON object: total_s, passed, as_expected, unexpected.
"""

import argparse
import contextlib
import faulthandler
import io
import json
import multiprocessing
import os
import platform
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed


class TimeoutException(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    def handler(signum, frame):
        raise TimeoutException("Timed out!")
    signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.signal(signal.SIGALRM, handler)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


class WriteOnlyStringIO(io.StringIO):
    def read(self, *args, **kwargs):
        raise IOError

    def readline(self, *args, **kwargs):
        raise IOError

    def readlines(self, *args, **kwargs):
        raise IOError

    def readable(self, *args, **kwargs):
        return False


class redirect_stdin(contextlib._RedirectStream):  # type: ignore
    _stream = "stdin"


@contextlib.contextmanager
def swallow_io():
    stream = WriteOnlyStringIO()
    with contextlib.redirect_stdout(stream):
        with contextlib.redirect_stderr(stream):
            with redirect_stdin(stream):
                yield


@contextlib.contextmanager
def create_tempdir():
    with tempfile.TemporaryDirectory() as dirname:
        cwd = os.getcwd()
        os.chdir(dirname)
        try:
            yield dirname
        finally:
            os.chdir(cwd)


def reliability_guard(maximum_memory_bytes=None):
    """As in human-eval: disables functions that could damage the host. Not
    a security boundary."""
    if maximum_memory_bytes is not None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (maximum_memory_bytes, maximum_memory_bytes))
        resource.setrlimit(resource.RLIMIT_DATA, (maximum_memory_bytes, maximum_memory_bytes))
        if not platform.uname().system == "Darwin":
            resource.setrlimit(resource.RLIMIT_STACK, (maximum_memory_bytes, maximum_memory_bytes))
    faulthandler.disable()
    import builtins
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid",
                 "fork", "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink",
                 "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown",
                 "getcwd", "chdir"):
        setattr(os, name, None)
    import shutil
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    import subprocess
    subprocess.Popen = None  # type: ignore
    builtins.help = None
    import sys
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def _unsafe_execute(program, timeout, result):
    with create_tempdir():
        import shutil
        rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
        reliability_guard()
        try:
            exec_globals = {}
            with swallow_io():
                with time_limit(timeout):
                    exec(program, exec_globals)
            result.append("passed")
        except TimeoutException:
            result.append("timed out")
        except BaseException as e:
            result.append("failed: %s" % e)
        shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir


def check_correctness(program, timeout):
    manager = multiprocessing.Manager()
    result = manager.list()
    p = multiprocessing.Process(target=_unsafe_execute, args=(program, timeout, result))
    p.start()
    p.join(timeout=timeout + 1)
    if p.is_alive():
        p.kill()
    if not result:
        result.append("timed out")
    outcome = result[0]
    manager.shutdown()
    return outcome == "passed", outcome


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args()
    with open(args.programs) as f:
        programs = [json.loads(line) for line in f if line.strip()]
    start = time.perf_counter()
    outcomes = {}
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(check_correctness, p["code"], args.timeout): p for p in programs}
        for future in as_completed(futures):
            outcomes[futures[future]["id"]] = future.result()
    total_s = time.perf_counter() - start
    passed = sum(ok for ok, _ in outcomes.values())
    unexpected = [{"id": p["id"], "outcome": outcomes[p["id"]][1][:200]} for p in programs
                  if outcomes[p["id"]][0] != (p.get("expect", "pass") == "pass")]
    print(json.dumps({"programs": len(programs), "workers": args.workers, "total_s": total_s,
                      "passed": passed, "as_expected": len(programs) - len(unexpected),
                      "unexpected": unexpected}), flush=True)


if __name__ == "__main__":
    main()
